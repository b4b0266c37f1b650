//! Identifiers and small value types. Orders, partners and sellers are named by the outside
//! world; sessions and hold ids are assigned by the plugin itself, in journal order; reservation,
//! escrow and trade ids are the LP's.

use std::fmt;

use rtgs_core::entry::{AccountId, Currency};
use rtgs_core::wire::{DecodeError, Reader, Wire, Writer};

wire_id!(
    /// `p2p_deposit_orders.id`: one customer's deposit order (the taxi call).
    OrderId(u64)
);
wire_id!(
    /// `partners.id`: the business customer whose widget the order came through.
    PartnerId(u64)
);
wire_id!(
    /// A P2P seller (its inventory is the balance of its ledger account).
    SellerId(u64)
);
wire_id!(
    /// `matching_sessions.id`: assigned by the plugin, 1, 2, 3 ... in journal order.
    SessionId(u64)
);
wire_id!(
    /// The LP's id of one capacity reservation (its lease).
    ReservationId(u64)
);
wire_id!(
    /// The LP's escrow for a confirmed reservation (`torq_escrow_id`).
    EscrowId(u64)
);
wire_id!(
    /// The LP's trade id, same meaning as the legacy `createTrade` answer's.
    TradeId(u64)
);

/// An opaque reference to the customer, chosen by the partner. **Never PII**: the journal is
/// replicated to every center and kept forever, so names, phone numbers and bank accounts live
/// apart, at the origin center (see the crate docs); the plugin only ever sees these 16 bytes.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct CustomerRef(pub [u8; 16]);

impl fmt::Debug for CustomerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Wire for CustomerRef {
    const BYTES_MIN: usize = 16;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(CustomerRef(r.array()?))
    }
}

/// The LP's `Idempotency-Key`: a hash of the request body **and** the session's attempt number.
///
/// ☠️ Seed §4-c (BARO appendix, 2026-09-13): the provider keeps keys unique *forever*, so a key
/// that is a function of the body alone is dead once its reservation expired — the same
/// remainder and anchor give the same key, which answers 330 for ever. The attempt number rises
/// only on 330 (that key is dead), never on BUSY / NO_POOL (no reservation was made: the same key
/// is still good, and changing it would undo the duplicate protection) nor on a transport
/// failure or a lost answer (exactly the cases the replay is for). It is stored with the session
/// (state, checkpoint), never in memory: a restart or a new owner must not bring a dead key back.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct IdempotencyKey {
    pub body_hash: u64,
    pub attempt: u32,
}

impl IdempotencyKey {
    /// The key of a request whose body encodes to `body`, at attempt `attempt`.
    pub fn of(op: u16, body: &[u8], attempt: u32) -> Self {
        IdempotencyKey { body_hash: rtgs_core::hash::bytes64(0x1D3E_0000 | u64::from(op), body), attempt }
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}.{}", self.body_hash, self.attempt)
    }
}

impl Wire for IdempotencyKey {
    const BYTES_MIN: usize = 12;
    fn put(&self, w: &mut Writer<'_>) {
        self.body_hash.put(w);
        self.attempt.put(w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(IdempotencyKey { body_hash: u64::get(r)?, attempt: u32::get(r)? })
    }
}

/// Ledger account numbers travel as their `u64`.
pub(crate) fn put_account(a: AccountId, w: &mut Writer<'_>) {
    a.0.put(w);
}

/// A ledger account in the plugin's encodings.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Account(pub AccountId);

impl Wire for Account {
    const BYTES_MIN: usize = 8;
    fn put(&self, w: &mut Writer<'_>) {
        put_account(self.0, w);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(Account(AccountId(u64::get(r)?)))
    }
}

/// A currency in the plugin's encodings (three uppercase letters, checked when read).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ccy(pub Currency);

impl Wire for Ccy {
    const BYTES_MIN: usize = 3;
    fn put(&self, w: &mut Writer<'_>) {
        w.bytes(&self.0.as_bytes());
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let b: [u8; 3] = r.array()?;
        Currency::new(&b).map(Ccy).map_err(|_| DecodeError::Invalid("currency"))
    }
}

/// Microseconds per second (settings are in seconds, the journal's time in µs).
pub const SECOND_US: u64 = 1_000_000;
