// Spike: a calm rate, a sudden spike, back to calm; errors must stay at 0.
//   BASE=100 PEAK=2000 scripts/k6-run.sh k6/spike.js
import { check } from 'k6';
import { RUN, transfer, summary } from './lib/rtgs.js';

const base = Number(__ENV.BASE || 100);
const peak = Number(__ENV.PEAK || 2000);

export const options = {
  scenarios: {
    spike: {
      executor: 'ramping-arrival-rate',
      startRate: base,
      timeUnit: '1s',
      preAllocatedVUs: Number(__ENV.VUS || 100),
      maxVUs: Number(__ENV.MAX_VUS || 400),
      stages: [
        { target: base, duration: '10s' },
        { target: peak, duration: '2s' },
        { target: peak, duration: '10s' },
        { target: base, duration: '2s' },
        { target: base, duration: '10s' },
      ],
    },
  },
  summaryTrendStats: ['med', 'p(90)', 'p(99)', 'max'],
  thresholds: {
    http_req_failed: ['rate==0'],
    checks: ['rate==1'],
  },
};

export default function () {
  const r = transfer(`${RUN}-${__VU}-${__ITER}`, '0.01');
  check(r, { 'accepted (202)': (res) => res.status === 202 });
}

export const handleSummary = summary;
