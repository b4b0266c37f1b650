-- Ledger holds: amounts a plugin reserved from an account's balance through its ledger intents
-- (rtgs_core::ledger::Hold, mission.md §3.4). A row exists while the hold does; it is written in
-- the batch's own transaction like the balances, so conservation holds for the stored rows too:
-- per currency, Σ account.balance_minor + Σ hold.amount_minor = funded.funded_minor.
CREATE TABLE IF NOT EXISTS hold (
    plugin       smallint NOT NULL CHECK (plugin BETWEEN 1 AND 3),
    id           bigint   NOT NULL,
    account      bigint   NOT NULL,
    amount_minor bigint   NOT NULL CHECK (amount_minor > 0),
    PRIMARY KEY (plugin, id)
);
