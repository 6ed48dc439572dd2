"""Where a job's money went (docs/guide/goodput.md): `ledger` splits the billed replica-seconds of a job, or
of a managed job across its attempts, into start-up, productive, recomputed, hung, straggler wait,
checkpointing and tail, prices them, and gives the advice they support (`advice`). Pure: plain values in
(`inputs`), plain values out; `gather` is the edge that reads them from run folders, jobs and logs."""
