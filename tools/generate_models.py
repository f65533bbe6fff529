#!/usr/bin/env python3
"""Writes fastpath's example models: deterministic ONNX files and their config.pbtxt.

The output is a Triton-layout model repository:
    <out>/<model>/config.pbtxt
    <out>/<model>/1/model.onnx

Models (every one has a dynamic batch dimension and max_batch_size 32):
    mlp_classifier       input  FP32 [-1, 64]         -> probabilities FP32 [-1, 10]
    cnn_classifier       image  FP32 [-1, 3, 32, 32]  -> logits        FP32 [-1, 10]
    transformer_encoder  tokens FP32 [-1, 16, 64]     -> hidden        FP32 [-1, 16, 64]
    resnet50             input  FP32 [-1, 3, 224, 224] -> logits       FP32 [-1, 1000]
                         (only with --with-resnet50: ~100 MB of weights, meant for GPU runs)

An image pipeline, as a Triton ensemble of three models:
    image_preprocess     image UINT8 [-1, H, W, 3] (any H, W) -> preprocessed FP32 [-1, 3, 32, 32]
                         (Cast, NHWC->NCHW, ImageNet mean/std, bilinear Resize to 32x32)
    classification_postprocess  logits FP32 [-1, 10] -> scores FP32 [-1, 5] (softmax, top 5),
                                                       classes INT64 [-1, 5]
    image_pipeline       platform "ensemble": image_preprocess -> cnn_classifier ->
                         classification_postprocess; IMAGE UINT8 [-1, -1, -1, 3] ->
                         SCORES FP32 [-1, 5], CLASSES INT64 [-1, 5]. No model file: its
                         version folder 1/ is empty, as Triton expects.

Weights come from a numpy generator seeded per model, and nothing else varies between runs
(no timestamps, fixed producer fields), so the same script writes the same bytes every time.
A stamp next to each model records a hash of this script and of the model's arguments; a run
whose stamp matches skips the model, which keeps repeated set-up runs fast.

Every model passes onnx.checker and strict shape inference, and the inferred output shape must
match the config. Running the models is left to the C++ tests, which compare fastpath's
outputs with a direct ONNX Runtime run (there is no Python ONNX Runtime on the build machines).

Needs Debian's python3-onnx (1.12) and python3-numpy. When the `python3` on PATH cannot import
them (a pyenv or venv interpreter, for example), the script re-runs itself with /usr/bin/python3.

Usage: python3 tools/generate_models.py [--out models/example] [--with-resnet50]
                                        [--only NAME ...] [--force]
"""

import argparse
import hashlib
import os
import sys
import time

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, checker, helper, numpy_helper, shape_inference
except ImportError as error:  # pragma: no cover - depends on the interpreter
    SYSTEM_PYTHON = "/usr/bin/python3"
    if os.path.exists(SYSTEM_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(
        SYSTEM_PYTHON
    ) and not os.environ.get("FASTPATH_GENERATOR_REEXEC"):
        os.environ["FASTPATH_GENERATOR_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    sys.exit(
        f"generate_models: {error}; install Debian's python3-onnx and python3-numpy "
        "(tools/setup.sh does)"
    )

# ONNX Runtime 1.29 reads IR versions up to 11 and opsets well past 17. IR 8 is what onnx 1.12
# writes natively. Opset 13 covers everything except LayerNormalization, which arrived in 17.
IR_VERSION = 8
OPSET = 13
OPSET_LAYER_NORM = 17
MAX_BATCH_SIZE = 32
PRODUCER = "fastpath tools/generate_models.py"
DEFAULT_OUT = "models/example"


class GraphBuilder:
    """Collects nodes and initializers; names every tensor uniquely and predictably."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.initializers = []
        self.counter = 0
        self.params = 0

    def name(self, prefix):
        self.counter += 1
        return f"{prefix}_{self.counter}"

    def const(self, prefix, array):
        array = np.ascontiguousarray(array)
        tensor_name = self.name(prefix)
        self.initializers.append(numpy_helper.from_array(array, tensor_name))
        if array.dtype == np.float32:
            self.params += array.size
        return tensor_name

    def weight(self, prefix, shape, fan_in, gain=2.0, scale=1.0):
        # He initialisation keeps activations in a sane range through many Relu layers, so the
        # outputs stay finite and comparable in FP32 and FP16.
        std = scale * np.sqrt(gain / fan_in)
        array = self.rng.standard_normal(shape, dtype=np.float32)
        array *= np.float32(std)
        return self.const(prefix, array)

    def bias(self, prefix, size, std=0.01):
        array = self.rng.standard_normal(size, dtype=np.float32) * np.float32(std)
        return self.const(prefix, array)

    def op(self, op_type, inputs, prefix=None, **attrs):
        output = self.name(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output

    def op_to(self, op_type, inputs, output, **attrs):
        """Like op, but writes a named graph output."""
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output, **attrs))
        return output

    # Layers.

    def gemm(self, x, in_features, out_features, scale=1.0):
        w = self.weight("fc_w", (out_features, in_features), in_features, scale=scale)
        b = self.bias("fc_b", out_features)
        return self.op("Gemm", [x, w, b], "fc", transB=1)

    def conv(self, x, in_ch, out_ch, kernel, stride=1, bias=True, scale=1.0):
        fan_in = in_ch * kernel * kernel
        inputs = [x, self.weight("conv_w", (out_ch, in_ch, kernel, kernel), fan_in, scale=scale)]
        if bias:
            inputs.append(self.bias("conv_b", out_ch))
        pad = kernel // 2
        return self.op(
            "Conv",
            inputs,
            "conv",
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad, pad, pad, pad],
        )

    def batch_norm(self, x, channels):
        rng = self.rng
        scale = self.const("bn_scale", rng.uniform(0.8, 1.2, channels).astype(np.float32))
        shift = self.const("bn_bias", (rng.standard_normal(channels) * 0.05).astype(np.float32))
        mean = self.const("bn_mean", (rng.standard_normal(channels) * 0.05).astype(np.float32))
        var = self.const("bn_var", rng.uniform(0.9, 1.1, channels).astype(np.float32))
        return self.op("BatchNormalization", [x, scale, shift, mean, var], "bn", epsilon=1e-5)

    def relu(self, x):
        return self.op("Relu", [x], "relu")

    def add(self, a, b):
        return self.op("Add", [a, b], "add")

    def matmul_weight(self, x, in_features, out_features, gain=1.0):
        w = self.weight("matmul_w", (in_features, out_features), in_features, gain=gain)
        y = self.op("MatMul", [x, w], "matmul")
        return self.op("Add", [y, self.bias("matmul_b", out_features)], "matmul_bias")

    def layer_norm(self, x, hidden):
        gamma = self.const("ln_scale", np.ones(hidden, dtype=np.float32))
        beta = self.const("ln_bias", np.zeros(hidden, dtype=np.float32))
        return self.op("LayerNormalization", [x, gamma, beta], "ln", axis=-1, epsilon=1e-5)

    def gelu(self, x):
        # Exact Gelu through Erf (the Gelu operator arrived only in opset 20); ORT fuses it.
        scaled = self.op("Mul", [x, self.const("gelu_rsqrt2", np.float32(1 / np.sqrt(2)))])
        erf = self.op("Erf", [scaled])
        one_plus = self.op("Add", [erf, self.const("gelu_one", np.float32(1.0))])
        half_x = self.op("Mul", [x, self.const("gelu_half", np.float32(0.5))])
        return self.op("Mul", [half_x, one_plus], "gelu")

    def model(self, graph_name, inputs, outputs, opset, doc):
        graph = helper.make_graph(
            self.nodes, graph_name, inputs, outputs, initializer=self.initializers
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", opset)],
            producer_name=PRODUCER,
            producer_version="1",
            doc_string=doc,
        )
        model.ir_version = IR_VERSION
        model.model_version = 1
        return model


def tensor(name, dims):
    """A graph input/output with a symbolic batch dimension."""
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch"] + list(dims))


# Models. Each returns (onnx model, inputs, outputs), where inputs/outputs are lists of
# (name, dims without the batch dimension) for the config.


def mlp_classifier():
    b = GraphBuilder(seed=1001)
    x = b.relu(b.gemm("input", 64, 128))
    x = b.relu(b.gemm(x, 128, 64))
    x = b.gemm(x, 64, 10, scale=0.5)
    b.op_to("Softmax", [x], "probabilities", axis=-1)
    inputs, outputs = [("input", [64])], [("probabilities", [10])]
    doc = "MLP classifier: Gemm/Relu x2, Gemm, Softmax. Deterministic random weights."
    model = b.model(
        "mlp_classifier",
        [tensor(n, d) for n, d in inputs],
        [tensor(n, d) for n, d in outputs],
        OPSET,
        doc,
    )
    return model, inputs, outputs, b.params


def cnn_classifier():
    """A small ResNet: stem, three stages of two basic blocks (16, 32, 64 channels), head.

    BatchNormalization stays unfolded so the model exercises it (ORT fuses it into Conv).
    """
    b = GraphBuilder(seed=1002)

    def conv_bn(x, in_ch, out_ch, kernel, stride, relu=True, scale=1.0):
        y = b.batch_norm(b.conv(x, in_ch, out_ch, kernel, stride, bias=False, scale=scale), out_ch)
        return b.relu(y) if relu else y

    def basic_block(x, in_ch, out_ch, stride):
        y = conv_bn(x, in_ch, out_ch, 3, stride)
        y = conv_bn(y, out_ch, out_ch, 3, 1, relu=False, scale=0.5)
        shortcut = x
        if stride != 1 or in_ch != out_ch:
            shortcut = conv_bn(x, in_ch, out_ch, 1, stride, relu=False)
        return b.relu(b.add(y, shortcut))

    x = conv_bn("image", 3, 16, 3, 1)
    channels = 16
    for stage, width in enumerate([16, 32, 64]):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            x = basic_block(x, channels, width, stride)
            channels = width
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flatten", axis=1)
    w = b.weight("fc_w", (10, channels), channels, scale=0.5)
    b.op_to("Gemm", [x, w, b.bias("fc_b", 10)], "logits", transB=1)
    inputs, outputs = [("image", [3, 32, 32])], [("logits", [10])]
    doc = "Small ResNet-style CNN classifier (basic blocks 2-2-2). Deterministic random weights."
    model = b.model(
        "cnn_classifier",
        [tensor(n, d) for n, d in inputs],
        [tensor(n, d) for n, d in outputs],
        OPSET,
        doc,
    )
    return model, inputs, outputs, b.params


def transformer_encoder():
    """One post-LayerNorm encoder block (BERT style): 4-head self-attention and a Gelu FFN."""
    seq, hidden, heads, ffn = 16, 64, 4, 256
    head_dim = hidden // heads
    b = GraphBuilder(seed=1003)
    x = "tokens"

    def split_heads(t):
        # [B, S, H*D] -> [B, S, H, D] -> [B, H, S, D]; 0 copies the batch and sequence dims.
        shape = b.const("heads_shape", np.array([0, 0, heads, head_dim], dtype=np.int64))
        t = b.op("Reshape", [t, shape], "reshape")
        return b.op("Transpose", [t], "transpose", perm=[0, 2, 1, 3])

    q = split_heads(b.matmul_weight(x, hidden, hidden))
    k = split_heads(b.matmul_weight(x, hidden, hidden))
    v = split_heads(b.matmul_weight(x, hidden, hidden))
    k_t = b.op("Transpose", [k], "transpose", perm=[0, 1, 3, 2])
    scores = b.op("MatMul", [q, k_t], "scores")
    scale = b.const("attn_scale", np.float32(1 / np.sqrt(head_dim)))
    scores = b.op("Mul", [scores, scale], "scaled_scores")
    probs = b.op("Softmax", [scores], "attn_probs", axis=-1)
    context = b.op("MatMul", [probs, v], "context")
    context = b.op("Transpose", [context], "transpose", perm=[0, 2, 1, 3])
    merge = b.const("merge_shape", np.array([0, 0, hidden], dtype=np.int64))
    context = b.op("Reshape", [context, merge], "reshape")
    attn_out = b.matmul_weight(context, hidden, hidden)
    x1 = b.layer_norm(b.add(x, attn_out), hidden)
    h = b.gelu(b.matmul_weight(x1, hidden, ffn, gain=2.0))
    h = b.matmul_weight(h, ffn, hidden)
    y = b.add(x1, h)
    gamma = b.const("ln_scale", np.ones(hidden, dtype=np.float32))
    beta = b.const("ln_bias", np.zeros(hidden, dtype=np.float32))
    b.op_to("LayerNormalization", [y, gamma, beta], "hidden", axis=-1, epsilon=1e-5)
    inputs, outputs = [("tokens", [seq, hidden])], [("hidden", [seq, hidden])]
    doc = "Transformer encoder block: 4-head attention, LayerNorm, Gelu FFN. Random weights."
    model = b.model(
        "transformer_encoder",
        [tensor(n, d) for n, d in inputs],
        [tensor(n, d) for n, d in outputs],
        OPSET_LAYER_NORM,
        doc,
    )
    return model, inputs, outputs, b.params


def resnet50():
    """ResNet-50 v1 (He et al. 2015): bottleneck blocks 3-4-6-3, stride on the first 1x1 conv.

    BatchNorm is folded into the convolutions, as exporters do for inference. The last conv of
    each residual branch is scaled down so that activations stay bounded over 16 blocks.
    """
    b = GraphBuilder(seed=1050)

    def conv_relu(x, in_ch, out_ch, kernel, stride, relu=True, scale=1.0):
        y = b.conv(x, in_ch, out_ch, kernel, stride, bias=True, scale=scale)
        return b.relu(y) if relu else y

    def bottleneck(x, in_ch, mid_ch, stride):
        out_ch = mid_ch * 4
        y = conv_relu(x, in_ch, mid_ch, 1, stride)
        y = conv_relu(y, mid_ch, mid_ch, 3, 1)
        y = conv_relu(y, mid_ch, out_ch, 1, 1, relu=False, scale=0.3)
        shortcut = x
        if stride != 1 or in_ch != out_ch:
            shortcut = conv_relu(x, in_ch, out_ch, 1, stride, relu=False)
        return b.relu(b.add(y, shortcut)), out_ch

    x = conv_relu("input", 3, 64, 7, 2)
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 64
    for stage, (mid, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)]):
        for block in range(blocks):
            stride = 2 if stage > 0 and block == 0 else 1
            x, channels = bottleneck(x, channels, mid, stride)
    x = b.op("GlobalAveragePool", [x], "gap")
    x = b.op("Flatten", [x], "flatten", axis=1)
    w = b.weight("fc_w", (1000, channels), channels, gain=1.0)
    b.op_to("Gemm", [x, w, b.bias("fc_b", 1000)], "logits", transB=1)
    inputs, outputs = [("input", [3, 224, 224])], [("logits", [1000])]
    doc = "ResNet-50 v1 architecture (bottlenecks 3-4-6-3), BN folded. Deterministic weights."
    model = b.model(
        "resnet50",
        [tensor(n, d) for n, d in inputs],
        [tensor(n, d) for n, d in outputs],
        OPSET,
        doc,
    )
    return model, inputs, outputs, b.params


# ImageNet's per-channel statistics, on the 0..255 scale of a uint8 image.
IMAGE_MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
IMAGE_STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]
CLASSIFIER_SIZE = 32  # cnn_classifier's input height and width
TOP_K = 5


def image_preprocess():
    """uint8 NHWC image of any size -> normalized FP32 NCHW at the classifier's size.

    Normalizing before resizing gives the same result as after (bilinear weights sum to 1),
    and it keeps the arithmetic at the input's size. No weights: the seed is unused.
    """
    b = GraphBuilder(seed=1101)
    x = b.op("Cast", ["image"], "cast", to=TensorProto.FLOAT)
    x = b.op("Transpose", [x], "nchw", perm=[0, 3, 1, 2])
    mean = b.const("mean", np.array(IMAGE_MEAN, dtype=np.float32).reshape(1, 3, 1, 1))
    inv_std = b.const("inv_std", (1 / np.array(IMAGE_STD, dtype=np.float32)).reshape(1, 3, 1, 1))
    x = b.op("Mul", [b.op("Sub", [x, mean], "centered"), inv_std], "normalized")
    # sizes = [N, C] of the input, then the classifier's [H, W].
    shape = b.op("Shape", [x], "shape")
    starts = b.const("starts", np.array([0], dtype=np.int64))
    ends = b.const("ends", np.array([2], dtype=np.int64))
    batch_channels = b.op("Slice", [shape, starts, ends], "batch_channels")
    hw = b.const("hw", np.array([CLASSIFIER_SIZE, CLASSIFIER_SIZE], dtype=np.int64))
    sizes = b.op("Concat", [batch_channels, hw], "sizes", axis=0)
    b.nodes.append(helper.make_node(
        "Resize", [x, "", "", sizes], ["preprocessed"], name="resize", mode="linear",
        coordinate_transformation_mode="half_pixel"))
    inputs = [("image", [-1, -1, 3], "TYPE_UINT8")]
    outputs = [("preprocessed", [3, CLASSIFIER_SIZE, CLASSIFIER_SIZE])]
    doc = "Image preprocessing: uint8 NHWC -> FP32 NCHW, ImageNet mean/std, bilinear resize."
    model = b.model(
        "image_preprocess",
        [helper.make_tensor_value_info("image", TensorProto.UINT8,
                                       ["batch", "height", "width", 3])],
        [tensor("preprocessed", [3, CLASSIFIER_SIZE, CLASSIFIER_SIZE])],
        OPSET,
        doc,
    )
    return model, inputs, outputs, b.params


def classification_postprocess():
    """logits -> the top-k class probabilities (softmax) and their class indices."""
    b = GraphBuilder(seed=1102)
    probabilities = b.op("Softmax", ["logits"], "softmax", axis=-1)
    k = b.const("k", np.array([TOP_K], dtype=np.int64))
    b.nodes.append(helper.make_node("TopK", [probabilities, k], ["scores", "classes"],
                                    name="topk", axis=-1, largest=1, sorted=1))
    inputs = [("logits", [10])]
    outputs = [("scores", [TOP_K]), ("classes", [TOP_K], "TYPE_INT64")]
    doc = f"Classification postprocessing: softmax, then the top {TOP_K} scores and classes."
    model = b.model(
        "classification_postprocess",
        [tensor("logits", [10])],
        [tensor("scores", [TOP_K]),
         helper.make_tensor_value_info("classes", TensorProto.INT64, ["batch", TOP_K])],
        OPSET,
        doc,
    )
    return model, inputs, outputs, b.params


MODELS = {
    "mlp_classifier": mlp_classifier,
    "cnn_classifier": cnn_classifier,
    "transformer_encoder": transformer_encoder,
    "resnet50": resnet50,
    "image_preprocess": image_preprocess,
    "classification_postprocess": classification_postprocess,
}
# Ensembles: name -> config.pbtxt text. Their step models must be written too.
IMAGE_PIPELINE_CONFIG = f"""# Written by tools/generate_models.py; regenerate rather than edit.
# A uint8 image of any size -> image_preprocess -> cnn_classifier -> top {TOP_K}.
name: "image_pipeline"
platform: "ensemble"
max_batch_size: {MAX_BATCH_SIZE}
input [
  {{
    name: "IMAGE"
    data_type: TYPE_UINT8
    format: FORMAT_NHWC
    dims: [ -1, -1, 3 ]
  }}
]
output [
  {{
    name: "SCORES"
    data_type: TYPE_FP32
    dims: [ {TOP_K} ]
  }},
  {{
    name: "CLASSES"
    data_type: TYPE_INT64
    dims: [ {TOP_K} ]
  }}
]
ensemble_scheduling {{
  step [
    {{
      model_name: "image_preprocess"
      model_version: -1
      input_map {{ key: "image" value: "IMAGE" }}
      output_map {{ key: "preprocessed" value: "preprocessed_image" }}
    }},
    {{
      model_name: "cnn_classifier"
      model_version: -1
      input_map {{ key: "image" value: "preprocessed_image" }}
      output_map {{ key: "logits" value: "logits" }}
    }},
    {{
      model_name: "classification_postprocess"
      model_version: -1
      input_map {{ key: "logits" value: "logits" }}
      output_map {{ key: "scores" value: "SCORES" }}
      output_map {{ key: "classes" value: "CLASSES" }}
    }}
  ]
}}
"""
ENSEMBLES = {"image_pipeline": IMAGE_PIPELINE_CONFIG}
DEFAULT_MODELS = ["mlp_classifier", "cnn_classifier", "transformer_encoder",
                  "image_preprocess", "classification_postprocess", "image_pipeline"]


def config_pbtxt(name, inputs, outputs):
    """Triton's config.pbtxt, with the field names Triton uses; dims exclude the batch dim."""

    def io(section, tensors):
        lines = [f"{section} ["]
        for i, (tensor_name, dims, *data_type) in enumerate(tensors):
            sep = "," if i + 1 < len(tensors) else ""
            lines += [
                "  {",
                f'    name: "{tensor_name}"',
                f"    data_type: {data_type[0] if data_type else 'TYPE_FP32'}",
                f"    dims: [ {', '.join(str(d) for d in dims)} ]",
                "  }" + sep,
            ]
        lines.append("]")
        return lines

    lines = [
        "# Written by tools/generate_models.py; regenerate rather than edit.",
        f'name: "{name}"',
        'platform: "onnxruntime_onnx"',
        f"max_batch_size: {MAX_BATCH_SIZE}",
        *io("input", inputs),
        *io("output", outputs),
        "instance_group [",
        "  {",
        "    kind: KIND_CPU",
        "    count: 1",
        "  }",
        "]",
        # Window 0: a lone request runs at once; under load, the requests that queue
        # while the instance is busy run together. Tune the window with
        # `fastpath bench --calibrate-batching`.
        "dynamic_batching {",
        "  max_queue_delay_microseconds: 0",
        "}",
    ]
    return "\n".join(lines) + "\n"


def validate(model, name, outputs):
    checker.check_model(model, full_check=True)
    inferred = shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    for value in inferred.graph.output:
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in
                value.type.tensor_type.shape.dim]
        want = {entry[0]: entry[1] for entry in outputs}[value.name]
        # A dim that inference cannot know (the preprocessor's Resize takes computed sizes)
        # is left to the declared graph output and to ONNX Runtime.
        if len(dims) != len(want) + 1 or any(
                d != -1 and d != w for d, w in zip(dims[1:], want)):
            raise SystemExit(f"generate_models: {name}: output {value.name} infers {dims}, "
                             f"config says [-1, {', '.join(map(str, want))}]")


def write_if_changed(path, data):
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def script_hash():
    with open(os.path.abspath(__file__), "rb") as f:
        digest = hashlib.sha256(f.read())
    digest.update(f"onnx {onnx.__version__} numpy {np.__version__}".encode())
    return digest.hexdigest()


def generate_ensemble(out, name):
    """An ensemble: its config.pbtxt and the empty version folder Triton's layout wants."""
    model_dir = os.path.join(out, name)
    os.makedirs(os.path.join(model_dir, "1"), exist_ok=True)
    write_if_changed(os.path.join(model_dir, "config.pbtxt"), ENSEMBLES[name].encode())
    print(f"{name:20s} ensemble  {os.path.join(model_dir, 'config.pbtxt')}")


def generate(out, name, force):
    if name in ENSEMBLES:
        return generate_ensemble(out, name)
    model_dir = os.path.join(out, name)
    onnx_path = os.path.join(model_dir, "1", "model.onnx")
    config_path = os.path.join(model_dir, "config.pbtxt")
    stamp_path = os.path.join(model_dir, ".generated")
    want_stamp = f"{script_hash()} {name}\n"
    if not force and os.path.exists(onnx_path) and os.path.exists(config_path):
        if os.path.exists(stamp_path) and read_text(stamp_path) == want_stamp:
            size = os.path.getsize(onnx_path)
            print(f"{name:20s} up to date ({size / 1e6:.1f} MB) {onnx_path}")
            return

    start = time.monotonic()
    model, inputs, outputs, params = MODELS[name]()
    validate(model, name, outputs)
    data = model.SerializeToString()
    os.makedirs(os.path.dirname(onnx_path), exist_ok=True)
    write_if_changed(onnx_path, data)
    write_if_changed(config_path, config_pbtxt(name, inputs, outputs).encode())
    write_if_changed(stamp_path, want_stamp.encode())
    opset = model.opset_import[0].version
    print(
        f"{name:20s} {params:>11,d} params  {len(data) / 1e6:7.1f} MB  opset {opset}  "
        f"{len(model.graph.node):3d} nodes  sha256 {hashlib.sha256(data).hexdigest()[:12]}  "
        f"{time.monotonic() - start:5.1f} s  {onnx_path}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=DEFAULT_OUT, help="model repository to write")
    parser.add_argument(
        "--with-resnet50",
        action="store_true",
        help="also write resnet50 (~100 MB, for GPU runs)",
    )
    known = sorted(list(MODELS) + list(ENSEMBLES))
    parser.add_argument("--only", nargs="+", choices=known, metavar="NAME",
                        help=f"write only these models ({', '.join(known)})")
    parser.add_argument("--force", action="store_true", help="rewrite even when up to date")
    args = parser.parse_args()

    names = args.only or DEFAULT_MODELS + (["resnet50"] if args.with_resnet50 else [])
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        generate(args.out, name, args.force)


if __name__ == "__main__":
    main()
