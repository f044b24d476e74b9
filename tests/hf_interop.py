"""Hugging Face's side of test_hf_interop (tests/test_hf_interop.c).

Usage:
  python hf_interop.py probe
      prints the torch and transformers versions; exit 3 when transformers
      cannot be imported (the C test then skips visibly).
  python hf_interop.py make DIR
      builds a small random GPT2LMHeadModel (n_layer 2, n_embd 64, n_head 4,
      vocab 512, n_positions 64; every tensor moved off its init so that
      LayerNorms and biases matter), save_pretrained(DIR/hf), and writes
      DIR/ids.bin (int32, 2 x 32 token ids) and DIR/hf_logits.bin (float32
      logits of those ids, [2, 32, 512]); and DIR/hf_old.safetensors, the
      same model as older transformers stored it: its state_dict with
      lm_head.weight (a copy of the tied wte) and each block's attn.bias
      (the causal mask, bool) and attn.masked_bias buffers.
  python hf_interop.py check DIR
      GPT2LMHeadModel.from_pretrained(DIR/ours) (what sublinear saved),
      refusing any missing, unexpected or mismatched key, and writes the
      logits of DIR/ids.bin to DIR/hf_on_ours_logits.bin.
  python hf_interop.py generate DIR
      builds another small random GPT2LMHeadModel (seed 4321, tensors moved
      further off their init so that greedy decoding wanders over many
      tokens), save_pretrained(DIR/gen), and writes DIR/gen_prompt.bin (int32,
      the 8 prompt ids) and DIR/gen_hf.bin (int32, the GEN_NEW = 24 ids that
      generate(do_sample=False) adds; no end-of-text token stops it early).
Runs on the CPU in float32 with eager attention.
"""
import os
import sys

try:
    import numpy as np
    import torch
    import transformers
    from safetensors.torch import save_file
    from transformers import GPT2Config, GPT2LMHeadModel
except ImportError as e:
    print("cannot import transformers: %s" % e)
    sys.exit(3)

B, T = 2, 32


def logits_of(model, ids):
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(ids.astype(np.int64)))
    return out.logits.to(torch.float32).numpy()


def make(d):
    torch.manual_seed(1234)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64,
                     n_ctx=64, bos_token_id=511, eos_token_id=511, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.save_pretrained(os.path.join(d, "hf"))
    rng = np.random.default_rng(5)
    ids = rng.integers(0, cfg.vocab_size, size=(B, T)).astype(np.int32)
    ids.tofile(os.path.join(d, "ids.bin"))
    logits_of(model, ids).astype(np.float32).tofile(os.path.join(d, "hf_logits.bin"))
    print("saved %s" % ", ".join(sorted(os.listdir(os.path.join(d, "hf")))))
    old = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    old["lm_head.weight"] = model.transformer.wte.weight.detach().clone()
    n = cfg.n_positions
    for i in range(cfg.n_layer):
        old["transformer.h.%d.attn.bias" % i] = torch.tril(
            torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n)
        old["transformer.h.%d.attn.masked_bias" % i] = torch.tensor(-1e4)
    save_file(old, os.path.join(d, "hf_old.safetensors"), metadata={"format": "pt"})


def check(d):
    model, info = GPT2LMHeadModel.from_pretrained(
        os.path.join(d, "ours"), output_loading_info=True, attn_implementation="eager",
        torch_dtype=torch.float32)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        print("from_pretrained reported: %s" % problems)
        sys.exit(1)
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        print("lm_head is not tied to transformer.wte")
        sys.exit(1)
    ids = np.fromfile(os.path.join(d, "ids.bin"), dtype=np.int32).reshape(B, T)
    logits_of(model, ids).astype(np.float32).tofile(os.path.join(d, "hf_on_ours_logits.bin"))
    print("from_pretrained: no missing, unexpected or mismatched keys; lm_head tied")


GEN_PROMPT, GEN_NEW = 8, 24


def generate(d):
    torch.manual_seed(4321)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64,
                     n_ctx=64, bos_token_id=511, eos_token_id=511, attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.15 * torch.randn_like(p))
    model.eval()
    model.save_pretrained(os.path.join(d, "gen"))
    rng = np.random.default_rng(6)
    prompt = rng.integers(0, 511, size=(1, GEN_PROMPT)).astype(np.int32)
    prompt.tofile(os.path.join(d, "gen_prompt.bin"))
    # greedy decoding with HF's own KV cache; no end-of-text stop
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    with torch.no_grad():
        out = model.generate(torch.from_numpy(prompt.astype(np.int64)),
                             attention_mask=torch.ones(1, GEN_PROMPT, dtype=torch.int64),
                             do_sample=False, max_new_tokens=GEN_NEW, num_beams=1)
    new = out[0, GEN_PROMPT:].numpy().astype(np.int32)
    if new.shape[0] != GEN_NEW:
        print("generate gave %d new tokens, not %d" % (new.shape[0], GEN_NEW))
        sys.exit(1)
    new.tofile(os.path.join(d, "gen_hf.bin"))
    print("generate(do_sample=False): %s" % " ".join(str(int(t)) for t in new))


def main():
    torch.set_num_threads(2)
    what = sys.argv[1]
    if what == "probe":
        print("torch %s, transformers %s" % (torch.__version__, transformers.__version__))
    elif what == "make":
        make(sys.argv[2])
    elif what == "check":
        check(sys.argv[2])
    elif what == "generate":
        generate(sys.argv[2])
    else:
        print("unknown command %s" % what)
        sys.exit(2)


main()
