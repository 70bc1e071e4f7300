"""evalkit's reference model: a small pure-KDA Kimi-Linear LM trained on evalkit's own long-context
generators, and its Gated DeltaNet twin (`scripts/train_reference_model.py` is its command line).

One idea per module: `settings` (what defines a run), `arithmetic` and `mixture` (training text),
`tokenizer`, `batches` (rows and loss weights), `kimi_config` and `architecture` (which model:
KDA or GDN), `gdn_on_kda` (the GDN twin's chunk through FLA's KDA kernel), `curriculum`, `warmup` (kernel
compilation before the clock starts), `train` (the loop), `decoder` and `quick_eval` (greedy
evaluation), `suite` (the default suite that ships), `card`, `checkpoint`, `bundle` (packing and
installing), `cli`. Heavy dependencies (torch, transformers, FLA) are imported where used, so the
package imports without them."""
