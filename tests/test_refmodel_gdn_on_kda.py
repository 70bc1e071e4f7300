"""The GDN twin trains through FLA's KDA chunk kernel (evalkit.refmodel.gdn_on_kda): a GDN layer
whose per-head decay is repeated over the key channels must equal transformers' own GDN. Checked
here with a float64 token-by-token KDA recurrence standing in for FLA's `chunk_kda`."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def naive_kda(q, k, v, g, beta, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False):
    """KDA, one token at a time in float64: S <- (I - b k k^T) Diag(exp g) S + b k v^T, o = S^T q."""
    dtype = q.dtype
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    if use_qk_l2norm_in_kernel:
        q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)  # as FLA and transformers
        k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    B, T, H, K = q.shape
    S = (
        torch.zeros(B, H, K, v.shape[-1], dtype=torch.float64)
        if initial_state is None
        else initial_state.double()
    )
    out = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None]
        kt, vt, bt = k[:, t], v[:, t], beta[:, t][..., None]
        S = S + kt[..., None] * (bt * (vt - torch.einsum("bhk,bhkv->bhv", kt, S)))[..., None, :]
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t] * K**-0.5, S))
    return torch.stack(out, 1).to(dtype), (S.to(dtype) if output_final_state else None)


def tiny_gdn():
    from evalkit.refmodel.architecture import build_model
    from evalkit.refmodel.settings import Settings

    s = Settings(arch="gdn", layers=2, hidden=64, heads=2, head_dim=32, intermediate=96)
    torch.manual_seed(0)
    model = build_model(s, 96).eval()
    with torch.no_grad():  # spread the 1-D parameters (decay, dt bias, norms) so every path matters
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.3 * torch.randn(p.shape))
    return model.double()


def test_gdn_layers_through_a_kda_kernel_equal_transformers_gdn(monkeypatch):
    import transformers.models.qwen3_5.modeling_qwen3_5 as qwen3_5

    from evalkit.refmodel.gdn_on_kda import NOTE, route_gdn_through_kda

    model = tiny_gdn()
    ids = torch.randint(0, 96, (2, 150), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits
    calls = []

    def recorded(*args, **kw):
        calls.append(args[3].shape)
        return naive_kda(*args, **kw)

    monkeypatch.setattr(qwen3_5, "torch_chunk_gated_delta_rule", qwen3_5.torch_chunk_gated_delta_rule)
    assert route_gdn_through_kda(recorded) == NOTE
    with torch.no_grad():
        got = model(input_ids=ids, use_cache=False).logits
    assert calls and all(shape == (2, 150, 2, 32) for shape in calls)  # the gate, per key channel
    # transformers computes its GDN chunk in fp32 whatever the input dtype: agreement to fp32 rounding
    assert (got - want).abs().max() < 1e-5 * want.abs().max()


def test_a_wrong_gate_expansion_would_be_caught(monkeypatch):
    """The check above can fail: the same route with the decay on one channel only differs."""
    import transformers.models.qwen3_5.modeling_qwen3_5 as qwen3_5

    from evalkit.refmodel.gdn_on_kda import route_gdn_through_kda

    model = tiny_gdn()
    ids = torch.randint(0, 96, (1, 80), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits

    def one_channel(q, k, v, g, beta, **kw):
        g = g.clone()
        g[..., 1:] = 0.0
        return naive_kda(q, k, v, g, beta, **kw)

    monkeypatch.setattr(qwen3_5, "torch_chunk_gated_delta_rule", qwen3_5.torch_chunk_gated_delta_rule)
    route_gdn_through_kda(one_channel)
    with torch.no_grad():
        got = model(input_ids=ids, use_cache=False).logits
    assert (got - want).abs().max() > 1e-3


def test_no_route_on_a_cpu_only_machine(monkeypatch):
    import transformers.models.qwen3_5.modeling_qwen3_5 as qwen3_5

    from evalkit.refmodel.gdn_on_kda import route_gdn_through_kda

    before = qwen3_5.torch_chunk_gated_delta_rule
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert route_gdn_through_kda() is None
    assert qwen3_5.torch_chunk_gated_delta_rule is before
