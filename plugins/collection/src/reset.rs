//! The operator's relayer nonce reset ([`ResetNonce`]).
//!
//! **Decided**: the command carries the chain's nonce as the operator read it (the relayer's
//! mined transaction count; `rtgs ops collection reset-nonce --chain-nonce N`), and the plugin
//! accepts it only when it cannot make a nonce be used twice, whatever that reading is worth:
//! * the relayer is idle — no nonce LOCKED (a broadcast or its chain check awaited), no STALE
//!   batch and no given-up nonce still unused (those pause it until the chain settles them);
//! * the new nonce is not below `next_nonce`: every nonce below it was sent by one of our
//!   batches, and with nothing in flight each of those is either mined or its cancellation is;
//!   going back could send a second transaction for a nonce the chain may still mine.
//!
//! So a reset only moves a relayer forward — past nonces another sender used (the account was
//! used outside the plugin) — and a wrong reading can at worst leave a gap, which the chain
//! holds pending and the stale monitor reports; it never double-spends a nonce. Reading the
//! chain from the owner's adapter (an effect) would make the check the plugin's own; it needs a
//! new effect kind and a pending-read slot in the relayer's state (left for later).

use crate::command::ResetNonce;
use crate::plugin::CollectionPlugin;
use crate::state::RejectKind;

impl CollectionPlugin {
    pub(crate) fn on_reset_nonce(&mut self, c: &ResetNonce) -> Result<(), RejectKind> {
        let idle = self.relayer_available(c.relayer);
        let r = self.st.relayers.get_mut(&c.relayer).ok_or(RejectKind::UnknownRelayer)?;
        if !idle {
            return Err(RejectKind::RelayerBusy);
        }
        if c.chain_nonce < r.next_nonce {
            return Err(RejectKind::NonceBehind);
        }
        r.next_nonce = c.chain_nonce;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::command::{CollectionCommand, RegisterRelayer, ResetNonce};
    use crate::state::RejectKind;
    use crate::types::{ChainId, RelayerId};
    use crate::CollectionPlugin;
    use rtgs_core::entry::{Bmi, CenterId, Entry, Payload};

    fn apply(p: &mut CollectionPlugin, seq: u64, cmd: CollectionCommand) {
        let command = cmd.to_plugin_command().unwrap_or_else(|e| panic!("{e}"));
        let entry = Entry {
            seq,
            epoch: 1,
            origin: CenterId(1),
            bmi: Bmi::NONE,
            timestamp_us: seq * 1_000,
            payload: Payload::Plugin(command),
        };
        p.apply_entry(&entry, &mut Vec::new());
    }

    #[test]
    fn a_reset_moves_an_idle_relayer_forward_only() {
        let mut p = CollectionPlugin::new();
        let relayer = RelayerId(7);
        apply(
            &mut p,
            1,
            CollectionCommand::RegisterRelayer(RegisterRelayer { chain: ChainId(1), relayer, next_nonce: 5 }),
        );
        apply(&mut p, 2, CollectionCommand::ResetNonce(ResetNonce { relayer, chain_nonce: 9 }));
        assert_eq!(p.relayer(relayer).map(|r| r.next_nonce), Some(9));
        // Backward would reuse nonces 5..9: refused, nothing changes.
        apply(&mut p, 3, CollectionCommand::ResetNonce(ResetNonce { relayer, chain_nonce: 6 }));
        assert_eq!(p.relayer(relayer).map(|r| r.next_nonce), Some(9));
        apply(&mut p, 4, CollectionCommand::ResetNonce(ResetNonce { relayer: RelayerId(8), chain_nonce: 1 }));
        let kinds: Vec<_> = p.rejections_recent().iter().map(|r| (r.seq, r.kind)).collect();
        assert_eq!(kinds, [(3, RejectKind::NonceBehind), (4, RejectKind::UnknownRelayer)]);
        assert_eq!(p.check_invariants(), Ok(()));
    }
}
