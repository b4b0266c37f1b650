-- A participant's bmi is journaled with its participant scope before it (rtgs_api::scope:
-- `~`, a 7-character tag of the participant, then the participant's text of at most 35), so
-- two participants may use the same text: 43 bytes at most (rtgs_core::limits::BMI_BYTES_MAX).
ALTER TABLE sequenced_bmi DROP CONSTRAINT IF EXISTS sequenced_bmi_bmi_check;
ALTER TABLE sequenced_bmi DROP CONSTRAINT IF EXISTS sequenced_bmi_bmi_bytes;
ALTER TABLE sequenced_bmi ADD CONSTRAINT sequenced_bmi_bmi_bytes
    CHECK (octet_length(bmi) BETWEEN 1 AND 43);
