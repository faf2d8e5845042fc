"""The controller process: `loop` (leader election, watch threads, the admission tick) and `watches`
(what each watched kind turns into)."""
