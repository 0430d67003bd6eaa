"""A GGUF model as the f32 safetensors folder vLLM loads (issue 53's tests:
SmolLM2-135M from apps/fetch-smollm2.sh). transformers dequantises the GGUF;
its quantizer mark is cleared before saving, since the weights it wrote are
plain f32 (save_pretrained refuses a model still marked GGUF-quantised).

    python convert_gguf.py MODEL.gguf OUT_DIR     # in the vLLM venv (gguf, accelerate)
"""
import pathlib
import sys

import torch
import transformers


def main() -> None:
    gguf, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    if (out / "model.safetensors").exists():
        print(out)
        return
    tok = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = out.with_name(out.name + ".partial")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.rename(out)
    print(out)


if __name__ == "__main__":
    main()
