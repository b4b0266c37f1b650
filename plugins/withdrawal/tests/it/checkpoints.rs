use crate::support::*;
