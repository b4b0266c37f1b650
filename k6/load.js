// Load: constant arrival rate of signed single transfers, thresholds on p99 and errors.
//   RATE=500 DURATION=30s scripts/k6-run.sh k6/load.js
import { check } from 'k6';
import { RUN, transfer, summary } from './lib/rtgs.js';

export const options = {
  scenarios: {
    transfers: {
      executor: 'constant-arrival-rate',
      rate: Number(__ENV.RATE || 500),
      timeUnit: '1s',
      duration: __ENV.DURATION || '30s',
      preAllocatedVUs: Number(__ENV.VUS || 50),
      maxVUs: Number(__ENV.MAX_VUS || 200),
    },
  },
  summaryTrendStats: ['med', 'p(90)', 'p(99)', 'max'],
  thresholds: {
    http_req_failed: ['rate==0'],
    'http_req_duration{endpoint:/v1/transfers}': ['p(99)<20'],
    checks: ['rate==1'],
  },
};

export default function () {
  const r = transfer(`${RUN}-${__VU}-${__ITER}`, '0.01');
  check(r, { 'accepted (202)': (res) => res.status === 202 });
}

export const handleSummary = summary;
