// Smoke: one participant, a few signed transfers and status reads; every answer checked.
//   scripts/k6-run.sh k6/smoke.js
import { check } from 'k6';
import { RUN, signed, transfer, summary } from './lib/rtgs.js';

export const options = {
  vus: 1,
  iterations: Number(__ENV.ITERATIONS || 50),
  summaryTrendStats: ['med', 'p(90)', 'p(99)', 'max'],
  thresholds: {
    http_req_failed: ['rate==0'],
    checks: ['rate==1'],
  },
};

export default function () {
  const bmi = `${RUN}-${__VU}-${__ITER}`;
  const posted = transfer(bmi, '0.01');
  check(posted, {
    'transfer accepted (202 ACSP)': (r) => r.status === 202 && r.json('status') === 'ACSP',
  });
  const status = signed('GET', `/v1/transfers/${bmi}`, '');
  check(status, {
    'status is final ACCC': (r) => r.status === 200 && r.json('status') === 'ACCC',
  });
  // A retry with the same body gets the original answer, not a second payment.
  const retry = transfer(bmi, '0.01');
  check(retry, { 'retry answered like the original': (r) => r.status === 202 });
}

export const handleSummary = summary;
