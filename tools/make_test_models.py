#!/usr/bin/env python3
"""Writes fastpath's tiny test models, deterministically (same bytes on every run).

Models:
  identity_<dtype>  one per KServe datatype: INPUT0 [-1,-1] -> Identity -> OUTPUT0
  simple            Triton's "simple": INPUT0, INPUT1 INT32 [-1,16] -> OUTPUT0 = sum,
                    OUTPUT1 = difference
  simple_fp32       the same in FP32
  mlp               X FP32 [-1,4] -> MatMul+Add -> Relu -> Gemm -> Y [-1,2], and
                    BATCH = Gather(Shape(X), 0): two compute-bearing nodes (ORT fuses the
                    MatMul and Add into a Gemm) beside two shape ops, for the placement
                    audit (flat output only)
  add_one           INPUT0 FP32 [-1,-1] -> OUTPUT0 = INPUT0 + 1   (ensemble steps;
  double            INPUT0 FP32 [-1,16] -> OUTPUT0 = INPUT0 * 2    flat output only)
  square            INPUT0 FP32 [-1,n,n] -> OUTPUT0 = MatMul(INPUT0, INPUT0): compute grows
                    as n^3 while the request grows as n^2, so a larger n is a slower device
                    to the drift tests and not mostly a longer request (flat output only)
  chain10, chain13  INPUT0 FP32 [-1,512] -> OUTPUT0: 10 (13) MatMuls by one 512x512 weight in
                    a row; the same interface, and chain13 does 1.3x the work of chain10
                    (the rollout gate's slower candidate; flat output only)
  corrupt           bytes that are not an ONNX model (flat output only, unless asked)
  scalar_*          rank-0 inputs and outputs, flat output only, no batching unless said:
                    scalar_clip      X [4], LO [], HI [] -> Y = Clip(X, LO, HI) [4],
                                     MEAN = ReduceMean(Y) [] (a loss with reduction mean)
                    scalar_trilu     X [3,3], K INT64 [] -> Y = Trilu(X, K) (opset 14)
                    scalar_cumsum    X [5], AXIS INT64 [] -> Y = CumSum(X, AXIS)
                    scalar_range     START, LIMIT, DELTA [] -> Y = Range(...) [-1]
                    scalar_quantize  X [4], SCALE [], ZERO UINT8 [] -> Y = QuantizeLinear UINT8
                    scalar_batched   X [batch] (a scalar per batch item) -> Y = 2 X [batch],
                                     batching

Two layouts:
  --out DIR          flat: DIR/<model>.onnx (the backend's unit tests use this)
  --repository DIR   Triton-style: DIR/<model>/1/model.onnx and DIR/<model>/config.pbtxt,
                     dims without the batch dimension, max_batch_size 8
Both may be given at once.

Needs python3-onnx (Debian's 1.12 is enough) and numpy; no pip.
"""

import argparse
import os
import sys

try:
    import onnx
    from onnx import TensorProto, helper
except ImportError:  # pragma: no cover - depends on the machine
    # A pyenv or venv python3 may shadow Debian's, which is the one with python3-onnx.
    # Re-run under it rather than fail, so `python3 tools/make_test_models.py` just works.
    debian_python = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(debian_python) and os.path.exists(
        debian_python
    ):
        os.execv(debian_python, [debian_python] + sys.argv)
    sys.exit("make_test_models.py: the onnx module is missing (apt-get install python3-onnx)")

# Pinned, not defaulted, so that a newer onnx package cannot change the bytes or write an
# IR version that ONNX Runtime 1.29 rejects. IR 8 is onnx 1.12's own; ORT 1.29 reads up to
# IR 11. Opset 13 is the first where Identity is defined for bfloat16.
IR_VERSION = 8
OPSET = 13
MAX_BATCH_SIZE = 8

# KServe datatype name -> (file-name suffix, ONNX element type, Triton config type).
DATATYPES = [
    ("BOOL", "bool", TensorProto.BOOL, "TYPE_BOOL"),
    ("UINT8", "uint8", TensorProto.UINT8, "TYPE_UINT8"),
    ("UINT16", "uint16", TensorProto.UINT16, "TYPE_UINT16"),
    ("UINT32", "uint32", TensorProto.UINT32, "TYPE_UINT32"),
    ("UINT64", "uint64", TensorProto.UINT64, "TYPE_UINT64"),
    ("INT8", "int8", TensorProto.INT8, "TYPE_INT8"),
    ("INT16", "int16", TensorProto.INT16, "TYPE_INT16"),
    ("INT32", "int32", TensorProto.INT32, "TYPE_INT32"),
    ("INT64", "int64", TensorProto.INT64, "TYPE_INT64"),
    ("FP16", "fp16", TensorProto.FLOAT16, "TYPE_FP16"),
    ("FP32", "fp32", TensorProto.FLOAT, "TYPE_FP32"),
    ("FP64", "fp64", TensorProto.DOUBLE, "TYPE_FP64"),
    ("BF16", "bf16", TensorProto.BFLOAT16, "TYPE_BF16"),
    ("BYTES", "bytes", TensorProto.STRING, "TYPE_STRING"),
]

# Not an ONNX protobuf: the first byte, 'f' (0x66), is field 12 with wire type 6, which
# does not exist, so every protobuf parser rejects it at byte 0.
CORRUPT_BYTES = b"fastpath: deliberately corrupt ONNX file, not a protobuf\n"


class ModelSpec:
    """One model: its graph, and the signature its config.pbtxt declares."""

    def __init__(self, name, model, inputs, outputs):
        self.name = name
        self.model = model
        self.inputs = inputs  # [(name, config type, dims including the batch dim)]
        self.outputs = outputs


def _finish(graph, opset=OPSET):
    model = helper.make_model(
        graph,
        producer_name="fastpath-make_test_models",
        producer_version="1",
        opset_imports=[helper.make_opsetid("", opset)],
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def identity_model(suffix, onnx_type, config_type):
    # Symbolic dims (dim_param) rather than empty ones so that ORT reports -1 for both
    # and the model documents which dims are the batch.
    shape = ["batch", "n"]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"], name="identity")],
        "identity_" + suffix,
        [helper.make_tensor_value_info("INPUT0", onnx_type, shape)],
        [helper.make_tensor_value_info("OUTPUT0", onnx_type, shape)],
    )
    dims = [-1, -1]
    return ModelSpec(
        "identity_" + suffix,
        _finish(graph),
        [("INPUT0", config_type, dims)],
        [("OUTPUT0", config_type, dims)],
    )


def simple_model(name, onnx_type, config_type):
    shape = ["batch", 16]
    graph = helper.make_graph(
        [
            helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"], name="sum"),
            helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"], name="difference"),
        ],
        name,
        [
            helper.make_tensor_value_info("INPUT0", onnx_type, shape),
            helper.make_tensor_value_info("INPUT1", onnx_type, shape),
        ],
        [
            helper.make_tensor_value_info("OUTPUT0", onnx_type, shape),
            helper.make_tensor_value_info("OUTPUT1", onnx_type, shape),
        ],
    )
    dims = [-1, 16]
    io = lambda names: [(n, config_type, dims) for n in names]  # noqa: E731
    return ModelSpec(name, _finish(graph), io(["INPUT0", "INPUT1"]), io(["OUTPUT0", "OUTPUT1"]))


def mlp_model():
    import numpy as np
    from onnx import numpy_helper

    def const(name, array):
        return numpy_helper.from_array(array, name)

    initializers = [
        const("W0", np.arange(32, dtype=np.float32).reshape(4, 8) / 32.0),
        const("B0", np.full((8,), 0.5, dtype=np.float32)),
        const("W1", np.arange(16, dtype=np.float32).reshape(8, 2) / 16.0),
        const("B1", np.zeros((2,), dtype=np.float32)),
        const("AXIS0", np.array(0, dtype=np.int64)),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "W0"], ["h0"], name="fc0"),
            helper.make_node("Add", ["h0", "B0"], ["h1"], name="fc0_bias"),
            helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
            helper.make_node("Gemm", ["h2", "W1", "B1"], ["Y"], name="fc1"),
            helper.make_node("Shape", ["X"], ["x_shape"], name="shape"),
            helper.make_node("Gather", ["x_shape", "AXIS0"], ["BATCH"], name="batch", axis=0),
        ],
        "mlp",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 4])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("BATCH", TensorProto.INT64, []),
        ],
        initializers,
    )
    return ModelSpec("mlp", _finish(graph), [("X", "TYPE_FP32", [-1, 4])],
                     [("Y", "TYPE_FP32", [-1, 2])])


def elementwise_model(name, op, operand, shape):
    """OUTPUT0 = op(INPUT0, operand) in FP32: a step for the ensemble tests."""
    graph = helper.make_graph(
        [helper.make_node(op, ["INPUT0", "OPERAND"], ["OUTPUT0"], name=op.lower())],
        name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, shape)],
        [helper.make_tensor("OPERAND", TensorProto.FLOAT, [], [operand])],
    )
    dims = [-1 if isinstance(d, str) else d for d in shape]
    return ModelSpec(name, _finish(graph), [("INPUT0", "TYPE_FP32", dims)],
                     [("OUTPUT0", "TYPE_FP32", dims)])


def square_model():
    shape = ["batch", "n", "n"]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["INPUT0", "INPUT0"], ["OUTPUT0"], name="square")],
        "square",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, shape)],
    )
    return ModelSpec("square", _finish(graph), [], [])


def chain_models():
    """Two models with one interface, one 1.3x the other's work: 10 and 13 MatMuls by the
    same 512x512 weight. The weight's entries are +-1/sqrt(512) with seeded signs, so each
    layer keeps the vector's size about the same and 13 layers stay far from overflow."""
    import numpy as np
    from onnx import numpy_helper

    n = 512
    signs = np.random.RandomState(13).randint(0, 2, size=(n, n)) * 2 - 1
    weight = numpy_helper.from_array((signs / np.sqrt(n)).astype(np.float32), "W")

    def chain(layers):
        nodes, last = [], "INPUT0"
        for i in range(layers):
            out = "OUTPUT0" if i == layers - 1 else f"h{i}"
            nodes.append(helper.make_node("MatMul", [last, "W"], [out], name=f"layer{i}"))
            last = out
        name = f"chain{layers}"
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["batch", n])],
            [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["batch", n])],
            [weight])
        return ModelSpec(name, _finish(graph), [], [])

    return [chain(10), chain(13)]


def fp16_accuracy_models():
    """The FP16 accuracy guard's pair: Y = X + 0.1 computed in FP16 (X cast down, the sum
    cast back up), and its FP32 twin. Inputs in [0, 1) differ by FP16 rounding, at most
    about 5e-4 (ORT's CPU provider runs the FP16 Add in FP32 behind casts it inserts, and
    the difference left is the rounding of the constant 0.1, 2.4e-5), so a tolerance of
    1e-3 passes and 1e-6 fails."""
    shape = ["batch", 16]
    fp16 = helper.make_graph(
        [
            helper.make_node("Cast", ["X"], ["x16"], name="to_fp16", to=TensorProto.FLOAT16),
            helper.make_node("Add", ["x16", "C16"], ["y16"], name="add"),
            helper.make_node("Cast", ["y16"], ["Y"], name="to_fp32", to=TensorProto.FLOAT),
        ],
        "fp16_add",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)],
        [helper.make_tensor("C16", TensorProto.FLOAT16, [], [0.1])],
    )
    fp32 = helper.make_graph(
        [helper.make_node("Add", ["X", "C"], ["Y"], name="add")],
        "fp32_add",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape)],
        [helper.make_tensor("C", TensorProto.FLOAT, [], [0.1])],
    )
    io = [("X", "TYPE_FP32", [-1, 16])], [("Y", "TYPE_FP32", [-1, 16])]
    return [ModelSpec("fp16_add", _finish(fp16), *io), ModelSpec("fp32_add", _finish(fp32), *io)]


def scalar_models():
    """Models whose inputs or outputs are rank-0 tensors: ops that take a scalar operand
    (Clip's bounds, Trilu's k, CumSum's axis, Range's operands, a quantizer's scale and
    zero point), a mean loss, and a scalar per batch item. Flat only: the tests serve them
    without a config.pbtxt, so that fastpath derives Triton's dims [1] + reshape []."""
    f, i64, u8 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8

    def model(name, nodes, inputs, outputs, opset=OPSET):
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs])
        return ModelSpec(name, _finish(graph, opset), [], [])

    return [
        model("scalar_clip",
              [helper.make_node("Clip", ["X", "LO", "HI"], ["Y"], name="clip"),
               helper.make_node("ReduceMean", ["Y"], ["MEAN"], name="mean", keepdims=0)],
              [("X", f, [4]), ("LO", f, []), ("HI", f, [])], [("Y", f, [4]), ("MEAN", f, [])]),
        model("scalar_trilu", [helper.make_node("Trilu", ["X", "K"], ["Y"], name="trilu")],
              [("X", f, [3, 3]), ("K", i64, [])], [("Y", f, [3, 3])], opset=14),
        model("scalar_cumsum", [helper.make_node("CumSum", ["X", "AXIS"], ["Y"], name="cumsum")],
              [("X", f, [5]), ("AXIS", i64, [])], [("Y", f, [5])]),
        model("scalar_range",
              [helper.make_node("Range", ["START", "LIMIT", "DELTA"], ["Y"], name="range")],
              [("START", f, []), ("LIMIT", f, []), ("DELTA", f, [])], [("Y", f, ["n"])]),
        model("scalar_quantize",
              [helper.make_node("QuantizeLinear", ["X", "SCALE", "ZERO"], ["Y"], name="quantize")],
              [("X", f, [4]), ("SCALE", f, []), ("ZERO", u8, [])], [("Y", u8, [4])]),
        model("scalar_batched",
              [helper.make_node("Add", ["X", "X"], ["Y"], name="twice")],
              [("X", f, ["batch"])], [("Y", f, ["batch"])]),
    ]


def unservable_signature_models():
    """Models ORT loads whose signature the protocol cannot serve: a graph with no outputs,
    two inputs ORT reads as one name (it cuts names at a NUL byte), and an input whose name
    is not UTF-8. Flat only: fastpath must refuse each at load, naming why."""
    f = TensorProto.FLOAT

    def identity(name, in_names, out_names):
        # Each input doubled; an output list shorter than the inputs leaves the rest unread.
        results = out_names + ["unread%d" % i for i in range(len(in_names) - len(out_names))]
        nodes = [helper.make_node("Add", [i, i], [o]) for i, o in zip(in_names, results)]
        graph = helper.make_graph(
            nodes, name,
            [helper.make_tensor_value_info(n, f, [2]) for n in in_names],
            [helper.make_tensor_value_info(n, f, [2]) for n in out_names])
        return _finish(graph)

    bad_utf8 = identity("bad_utf8_name", ["BADNAME"], ["Y"])
    # The name's bytes changed after the fact, length kept: onnx.helper takes str only.
    bad_utf8_bytes = serialize(bad_utf8).replace(b"BADNAME", b"in\xff\xfeput")
    no_outputs = identity("no_outputs", ["X"], [])
    return [
        ("no_outputs", serialize(no_outputs)),
        ("nul_names", serialize(identity("nul_names", ["a\0", "a\0b"], ["Y", "Z"]))),
        ("bad_utf8_name", bad_utf8_bytes),
    ]


def ensemble_step_models():
    # Flat only: the ensemble tests write their own configs around them.
    return [
        elementwise_model("add_one", "Add", 1.0, ["batch", "n"]),
        elementwise_model("double", "Mul", 2.0, ["batch", 16]),
    ]


def all_models():
    models = [identity_model(suffix, t, c) for _, suffix, t, c in DATATYPES]
    models.append(simple_model("simple", TensorProto.INT32, "TYPE_INT32"))
    models.append(simple_model("simple_fp32", TensorProto.FLOAT, "TYPE_FP32"))
    return models


def config_pbtxt(spec):
    """Triton's config for the model: dims without the batch dimension."""

    def tensors(kind, entries):
        blocks = []
        for name, config_type, dims in entries:
            no_batch = ", ".join(str(d) for d in dims[1:])
            blocks.append(
                "  {\n"
                f'    name: "{name}"\n'
                f"    data_type: {config_type}\n"
                f"    dims: [ {no_batch} ]\n"
                "  }"
            )
        return f"{kind} [\n" + ",\n".join(blocks) + "\n]\n"

    return (
        f'name: "{spec.name}"\n'
        'backend: "onnxruntime"\n'
        f"max_batch_size: {MAX_BATCH_SIZE}\n"
        + tensors("input", spec.inputs)
        + tensors("output", spec.outputs)
        # The execution provider is always explicit in fastpath; these models are for CPU.
        + "instance_group [\n  {\n    kind: KIND_CPU\n    count: 1\n  }\n]\n"
    )


def write_if_changed(path, data):
    """Writes only when the bytes differ, so builds that depend on the files stay quiet."""
    if os.path.exists(path):
        with open(path, "rb") as f:
            if f.read() == data:
                return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def serialize(model):
    # Protobuf's deterministic mode fixes the order of map fields; these models have none
    # today, but the guarantee should not depend on that.
    return model.SerializeToString(deterministic=True)


def write_flat(out_dir, models):
    for spec in (models + [mlp_model(), square_model()] + chain_models() + ensemble_step_models() +
                 fp16_accuracy_models() + scalar_models()):
        write_if_changed(os.path.join(out_dir, spec.name + ".onnx"), serialize(spec.model))
    for name, data in unservable_signature_models():
        write_if_changed(os.path.join(out_dir, name + ".onnx"), data)
    write_if_changed(os.path.join(out_dir, "corrupt.onnx"), CORRUPT_BYTES)


def write_repository(repo_dir, models, include_corrupt):
    for spec in models:
        write_if_changed(os.path.join(repo_dir, spec.name, "1", "model.onnx"), serialize(spec.model))
        write_if_changed(
            os.path.join(repo_dir, spec.name, "config.pbtxt"), config_pbtxt(spec).encode()
        )
    if include_corrupt:
        # A model whose file is not ONNX: it must become UNAVAILABLE while the others serve.
        # The config is complete, so the failure is the file's and nothing else's.
        corrupt = simple_model("corrupt", TensorProto.INT32, "TYPE_INT32")
        write_if_changed(os.path.join(repo_dir, "corrupt", "1", "model.onnx"), CORRUPT_BYTES)
        write_if_changed(
            os.path.join(repo_dir, "corrupt", "config.pbtxt"), config_pbtxt(corrupt).encode()
        )


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="flat output folder: <model>.onnx")
    parser.add_argument("--repository", help="Triton-style model repository folder")
    parser.add_argument(
        "--include-corrupt",
        action="store_true",
        help="also put the corrupt model into the repository (it is always in --out)",
    )
    args = parser.parse_args(argv)
    if not args.out and not args.repository:
        parser.error("give --out DIR, --repository DIR, or both")
    models = all_models()
    if args.out:
        write_flat(args.out, models)
    if args.repository:
        write_repository(args.repository, models, args.include_corrupt)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
