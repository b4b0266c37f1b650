// Full load: a constant arrival rate of signed batches (`POST /v1/transfers/batch`), every item
// accepted; the transfers/s is what the API took end to end.
//   RATE=100 BATCH=1000 DURATION=15s scripts/k6-run.sh k6/batch.js
import { check } from 'k6';
import { Counter } from 'k6/metrics';
import { DEBTOR, CREDITOR, RUN, constantArrival, signed, summary } from './lib/rtgs.js';

const size = Number(__ENV.BATCH || 1000);
const transfers = new Counter('transfers_accepted');

export const options = constantArrival('batches', { rate: 100, duration: '15s', vus: 64, maxVus: 128 }, {});

export default function () {
  const items = [];
  for (let i = 0; i < size; i += 1) {
    items.push(`{"bmi":"${RUN}-${__VU}-${__ITER}-${i}","debtor":${DEBTOR},"creditor":${CREDITOR},"amount":"0.01","currency":"EUR"}`);
  }
  const r = signed('POST', '/v1/transfers/batch', `{"transfers":[${items.join(',')}]}`);
  const ok = check(r, {
    'batch accepted (202)': (res) => res.status === 202,
    'every item accepted': (res) => res.status === 202 && res.json('accepted') === size,
  });
  if (ok) transfers.add(size);
}

export const handleSummary = summary;
