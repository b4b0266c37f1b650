-- The plugin host's state of one center (rtgs_dc1..3): one row per enabled plugin, written in
-- the same transaction as the applied batch whose entries changed it (or standalone), so that a
-- restarting center restores ledger and plugins at the same watermark.
--
-- `state` is the plugin's own checkpoint encoding (rtgs_core::plugin::Plugin::encode), checked
-- against `state_hash` (the plugin's whole-state hash) before it is written and after it is
-- read. `owner`/`owner_term` say which center executes the plugin's effects (SetOwner entries).

CREATE TABLE IF NOT EXISTS plugin_state (
    kind             text        PRIMARY KEY CHECK (kind IN ('collection', 'withdrawal', 'matching')),
    seq_applied      bigint      NOT NULL CHECK (seq_applied >= 0),
    owner            smallint    NOT NULL CHECK (owner BETWEEN 1 AND 8),
    owner_term       bigint      NOT NULL CHECK (owner_term >= 0),
    host_ops_refused bigint      NOT NULL CHECK (host_ops_refused >= 0),
    state            bytea       NOT NULL,
    state_hash       bigint      NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
