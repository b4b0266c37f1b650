-- Every statement line (rtgs_core::statement): what each applied entry did to each account it
-- moved or changed — transfers, account administration, the plugins' ledger intents — with the
-- account's available balance after the entry, written by binary COPY in the commit that
-- applies the entry (issue 15: a statement covers the account's whole history, paged by seq).
-- `k` orders the lines of one entry. The entry's bmi is applied_entry's (joined by seq).
-- Entries applied before this migration have no lines (their balances after are not known).
CREATE TABLE IF NOT EXISTS statement_line (
    account             bigint   NOT NULL,
    seq                 bigint   NOT NULL CHECK (seq >= 1),
    k                   smallint NOT NULL CHECK (k >= 0),
    kind                smallint NOT NULL CHECK (kind BETWEEN 1 AND 10),
    counterparty        bigint,
    amount_minor        bigint   NOT NULL CHECK (amount_minor >= 0),
    balance_after_minor bigint   NOT NULL CHECK (balance_after_minor >= 0),
    PRIMARY KEY (account, seq, k)
);
