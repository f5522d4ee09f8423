//! Secret values kept off every screen and log: `data`/`stringData` values replaced,
//! keys kept (filled in by the hardening work, issue 25).
