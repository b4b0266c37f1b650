// Signs and sends requests like a real participant (see README "The HTTP API"):
// x-rtgs-signature = hex(HMAC-SHA256(secret, METHOD \n PATH_AND_QUERY \n TIMESTAMP \n BODY)).
import http from 'k6/http';
import crypto from 'k6/crypto';

export const BASE_URL = __ENV.BASE_URL || 'http://127.0.0.1:8080';
export const KEY = __ENV.RTGS_KEY || 'bank-a';
export const SECRET = __ENV.RTGS_SECRET || 'change-me-bank-a-0123456789';
// Accounts of the example config (node/api/participants.example.json): bank-a owns 1 and 2.
export const DEBTOR = Number(__ENV.RTGS_DEBTOR || 1);
export const CREDITOR = Number(__ENV.RTGS_CREDITOR || 3);
// One run id per k6 process, so that every bmi of a run is new (bmi ≤ 35 printable characters).
export const RUN = __ENV.RTGS_RUN || `K${Date.now().toString(36)}`;

let sent = 0;

// Every attempt is signed anew with a nonce after the seconds (VU and counter): the node accepts
// a signed write once, so a retry or two identical requests in one second stay distinct.
export function signed(method, path, body) {
  sent += 1;
  const ts = `${Math.floor(Date.now() / 1000)}.v${__VU}n${sent}`;
  const payload = body || '';
  const signature = crypto.hmac('sha256', SECRET, `${method}\n${path}\n${ts}\n${payload}`, 'hex');
  const params = {
    headers: {
      'content-type': 'application/json',
      'x-rtgs-key': KEY,
      'x-rtgs-timestamp': ts,
      'x-rtgs-signature': signature,
    },
    tags: { endpoint: path.startsWith('/v1/transfers/') ? '/v1/transfers/{bmi}' : path },
  };
  return http.request(method, `${BASE_URL}${path}`, payload === '' ? null : payload, params);
}

export function transfer(bmi, amount) {
  const body = JSON.stringify({ bmi, debtor: DEBTOR, creditor: CREDITOR, amount: amount || '0.01', currency: 'EUR' });
  return signed('POST', '/v1/transfers', body);
}

// Options of one constant-arrival-rate scenario named `name` (RATE, DURATION, VUS and MAX_VUS
// override the defaults), no failed request or check, plus `thresholds`.
export function constantArrival(name, defaults, thresholds) {
  return {
    scenarios: {
      [name]: {
        executor: 'constant-arrival-rate',
        rate: Number(__ENV.RATE || defaults.rate),
        timeUnit: '1s',
        duration: __ENV.DURATION || defaults.duration,
        preAllocatedVUs: Number(__ENV.VUS || defaults.vus),
        maxVUs: Number(__ENV.MAX_VUS || defaults.maxVus),
      },
    },
    summaryTrendStats: ['med', 'p(90)', 'p(99)', 'max'],
    thresholds: { http_req_failed: ['rate==0'], checks: ['rate==1'], ...thresholds },
  };
}

// The JSON summary k6 writes at the end (K6_SUMMARY=path), plus the usual text on stdout.
export function summary(data) {
  const out = { stdout: textSummary(data) };
  if (__ENV.K6_SUMMARY) out[__ENV.K6_SUMMARY] = JSON.stringify(data, null, 2);
  return out;
}

function textSummary(data) {
  const m = data.metrics;
  const v = (name, field) => (m[name] && m[name].values[field] !== undefined ? m[name].values[field] : 0);
  return [
    `requests ${v('http_reqs', 'count')} (${v('http_reqs', 'rate').toFixed(1)}/s), failed ${(100 * v('http_req_failed', 'rate')).toFixed(2)} %`,
    `http_req_duration p50 ${v('http_req_duration', 'med').toFixed(2)} ms, p90 ${v('http_req_duration', 'p(90)').toFixed(2)} ms, p99 ${v('http_req_duration', 'p(99)').toFixed(2)} ms`,
    `checks passed ${(100 * v('checks', 'rate')).toFixed(2)} %`,
    '',
  ].join('\n');
}
