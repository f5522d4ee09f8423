//! Release records and the promotion gate (DESIGN §7).
