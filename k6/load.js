// Load: constant arrival rate of signed single transfers, thresholds on p99 and errors.
//   RATE=500 DURATION=30s scripts/k6-run.sh k6/load.js
import { check } from 'k6';
import { RUN, constantArrival, transfer, summary } from './lib/rtgs.js';

export const options = constantArrival(
  'transfers',
  { rate: 500, duration: '30s', vus: 50, maxVus: 200 },
  { 'http_req_duration{endpoint:/v1/transfers}': ['p(99)<20'] },
);

export default function () {
  const r = transfer(`${RUN}-${__VU}-${__ITER}`, '0.01');
  check(r, { 'accepted (202)': (res) => res.status === 202 });
}

export const handleSummary = summary;
