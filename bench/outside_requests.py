#!/usr/bin/env python3
"""Writes one inference request for a model, as an outside load generator sends it.

Asks the running server for the model's metadata (GET /v2/models/NAME), fills every input with
batch 1 of seeded random values, and writes into OUT_DIR:
  http.body         the HTTP body: the JSON header, then the tensors in Triton's binary
                    extension (outputs asked for as binary too)
  http.json_length  the header's length, for Inference-Header-Content-Length
  grpc.body         ModelInfer's request as gRPC frames it on the wire (a 5-byte prefix, then
                    the protobuf, encoded by `protoc --encode` from proto/grpc_service.proto),
                    the tensors in raw_input_contents

wrk and h2load send these bodies (bench/efficiency_ab.sh with CLIENT=outside).

Usage: bench/outside_requests.py HTTP_URL MODEL OUT_DIR
"""
import json
import os
import random
import struct
import subprocess
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# KServe datatype: (struct format of one element, a generator of one random value)
ELEMENTS = {
    "FP32": ("f", lambda r: r.uniform(-1, 1)),
    "FP64": ("d", lambda r: r.uniform(-1, 1)),
    "INT64": ("q", lambda r: r.randrange(0, 100)),
    "INT32": ("i", lambda r: r.randrange(0, 100)),
    "INT8": ("b", lambda r: r.randrange(0, 100)),
    "UINT8": ("B", lambda r: r.randrange(0, 256)),
    "BOOL": ("?", lambda r: r.random() < 0.5),
}


def text_bytes(data):
    """A protobuf text-format bytes literal."""
    return '"' + "".join(f"\\{b:03o}" for b in data) + '"'


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    url, model, out = sys.argv[1:]
    with urllib.request.urlopen(f"{url}/v2/models/{model}") as reply:
        meta = json.load(reply)
    rng = random.Random(1)
    header = {"inputs": [], "outputs": []}
    tensors = []
    text = [f'model_name: "{model}"']
    for tensor in meta["inputs"]:
        if tensor["datatype"] not in ELEMENTS:
            sys.exit(f"input '{tensor['name']}': datatype {tensor['datatype']} is not supported here")
        shape = [1 if d < 0 else d for d in tensor["shape"]]
        count = 1
        for d in shape:
            count *= d
        fmt, value = ELEMENTS[tensor["datatype"]]
        data = struct.pack(f"<{count}{fmt}", *(value(rng) for _ in range(count)))
        tensors.append(data)
        header["inputs"].append({"name": tensor["name"], "datatype": tensor["datatype"], "shape": shape,
                                 "parameters": {"binary_data_size": len(data)}})
        text.append(f'inputs {{ name: "{tensor["name"]}" datatype: "{tensor["datatype"]}" '
                    + " ".join(f"shape: {d}" for d in shape) + " }")
    for tensor in meta["outputs"]:
        header["outputs"].append({"name": tensor["name"], "parameters": {"binary_data": True}})
        text.append(f'outputs {{ name: "{tensor["name"]}" }}')
    text += [f"raw_input_contents: {text_bytes(data)}" for data in tensors]

    json_header = json.dumps(header, separators=(",", ":")).encode()
    with open(os.path.join(out, "http.body"), "wb") as f:
        f.write(json_header + b"".join(tensors))
    with open(os.path.join(out, "http.json_length"), "w") as f:
        f.write(str(len(json_header)))
    message = subprocess.run(
        ["protoc", f"--proto_path={ROOT}/proto", "--encode=inference.ModelInferRequest", "grpc_service.proto"],
        input="\n".join(text).encode(), capture_output=True, check=True).stdout
    with open(os.path.join(out, "grpc.body"), "wb") as f:
        f.write(struct.pack(">BI", 0, len(message)) + message)


if __name__ == "__main__":
    main()
