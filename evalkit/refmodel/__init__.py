"""evalkit's reference model: a small pure-KDA Kimi-Linear LM trained on evalkit's own long-context
generators (`scripts/train_reference_model.py` is its command line).

One idea per module: `settings` (what defines a run), `arithmetic` and `mixture` (training text),
`tokenizer`, `batches` (rows and loss weights), `kimi_config`, `curriculum`, `warmup` (kernel
compilation before the clock starts), `train` (the loop), `decoder` and `quick_eval` (greedy
evaluation), `suite` (the default suite that ships), `card`, `checkpoint`, `bundle` (packing and
installing), `cli`. Heavy dependencies (torch, transformers, FLA) are imported where used, so the
package imports without them."""
