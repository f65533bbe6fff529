// The peer: the unbatched KServe v2 server a team would write by hand with Node.js's http
// module and onnxruntime-node. One model, one ORT session, one request per session.run,
// no batching. Serves the JSON and the binary tensor extension infer routes, health and
// model metadata, so that `fastpath bench` drives it exactly like fastpath.
//
//   node server.js --model-repository models/example --model cnn_classifier [--port 8010]
//                  [--host 127.0.0.1] [--threads 1]
//
// Not part of fastpath; kept deliberately plain.
'use strict';

const http = require('http');
const fs = require('fs');
const path = require('path');
const ort = require('onnxruntime-node');

function parseArgs(argv) {
  const args = { port: 8010, host: '127.0.0.1', threads: 1, modelRepository: '', model: '', version: '' };
  for (let i = 2; i < argv.length; i++) {
    const [flag, inline] = argv[i].split('=', 2);
    const value = inline !== undefined ? inline : argv[++i];
    switch (flag) {
      case '--port': args.port = Number(value); break;
      case '--host': args.host = value; break;
      case '--threads': args.threads = Number(value); break;
      case '--model-repository': args.modelRepository = value; break;
      case '--model': args.model = value; break;
      case '--model-version': args.version = value; break;
      case '--port-file': args.portFile = value; break;
      default:
        console.error(`unknown flag ${flag}`);
        process.exit(2);
    }
  }
  if (!args.modelRepository || !args.model) {
    console.error('usage: node server.js --model-repository DIR --model NAME [--port N] [--host ADDR] [--threads N]');
    process.exit(2);
  }
  return args;
}

// KServe datatype <-> onnxruntime-node tensor type and typed array.
const TYPES = {
  FP32: { ort: 'float32', array: Float32Array },
  FP64: { ort: 'float64', array: Float64Array },
  INT8: { ort: 'int8', array: Int8Array },
  INT16: { ort: 'int16', array: Int16Array },
  INT32: { ort: 'int32', array: Int32Array },
  INT64: { ort: 'int64', array: BigInt64Array },
  UINT8: { ort: 'uint8', array: Uint8Array },
  UINT16: { ort: 'uint16', array: Uint16Array },
  UINT32: { ort: 'uint32', array: Uint32Array },
  UINT64: { ort: 'uint64', array: BigUint64Array },
  BOOL: { ort: 'bool', array: Uint8Array },
};
const FROM_ORT = Object.fromEntries(Object.entries(TYPES).map(([k, v]) => [v.ort, k]));

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function latestVersion(dir) {
  const versions = fs.readdirSync(dir).filter((d) => /^\d+$/.test(d) && fs.existsSync(path.join(dir, d, 'model.onnx')));
  if (versions.length === 0) throw new Error(`no version of the model in ${dir}`);
  return versions.map(Number).sort((a, b) => b - a)[0].toString();
}

function toTensor(input, bytes) {
  const type = TYPES[input.datatype];
  if (!type) throw new HttpError(400, `input '${input.name}': unsupported datatype ${input.datatype}`);
  const count = input.shape.reduce((a, b) => a * b, 1);
  let data;
  if (bytes) {
    if (bytes.length !== count * type.array.BYTES_PER_ELEMENT) {
      throw new HttpError(400, `input '${input.name}': ${bytes.length} bytes for shape [${input.shape}]`);
    }
    // Copy into an aligned buffer: the body's offset need not be a multiple of the element size.
    const aligned = new Uint8Array(bytes.length);
    aligned.set(bytes);
    data = new type.array(aligned.buffer);
  } else {
    const flat = Array.isArray(input.data) ? input.data.flat(Infinity) : null;
    if (!flat || flat.length !== count) throw new HttpError(400, `input '${input.name}': need ${count} values in 'data'`);
    data = type.array === BigInt64Array || type.array === BigUint64Array ? type.array.from(flat.map(BigInt)) : type.array.from(flat);
  }
  return new ort.Tensor(type.ort, data, input.shape);
}

function parseRequest(req, body) {
  const headerLength = req.headers['inference-header-content-length'];
  let json;
  let binaryStart = body.length;
  if (headerLength !== undefined) {
    const n = Number(headerLength);
    if (!Number.isInteger(n) || n < 0 || n > body.length) throw new HttpError(400, 'bad Inference-Header-Content-Length');
    json = body.subarray(0, n).toString('utf8');
    binaryStart = n;
  } else {
    json = body.toString('utf8');
  }
  let request;
  try {
    request = JSON.parse(json);
  } catch (e) {
    throw new HttpError(400, `malformed JSON: ${e.message}`);
  }
  if (!request || !Array.isArray(request.inputs)) throw new HttpError(400, "the request needs an 'inputs' array");
  const feeds = {};
  let offset = binaryStart;
  for (const input of request.inputs) {
    const size = input.parameters && input.parameters.binary_data_size;
    let bytes = null;
    if (size !== undefined) {
      if (offset + size > body.length) throw new HttpError(400, `input '${input.name}': binary data runs past the body`);
      bytes = body.subarray(offset, offset + size);
      offset += size;
    }
    feeds[input.name] = toTensor(input, bytes);
  }
  return { request, feeds };
}

function main() {
  const args = parseArgs(process.argv);
  const modelDir = path.join(args.modelRepository, args.model);
  const version = args.version || latestVersion(modelDir);
  const modelFile = path.join(modelDir, version, 'model.onnx');
  const options = {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  };
  ort.InferenceSession.create(modelFile, options).then((session) => {
    const metadata = {
      name: args.model,
      versions: [version],
      platform: 'onnxruntime_onnx',
      inputs: session.inputMetadata.map((m) => ({
        name: m.name,
        datatype: FROM_ORT[m.type] || m.type,
        shape: m.shape.map((d) => (typeof d === 'number' ? d : -1)),
      })),
      outputs: session.outputMetadata.map((m) => ({
        name: m.name,
        datatype: FROM_ORT[m.type] || m.type,
        shape: m.shape.map((d) => (typeof d === 'number' ? d : -1)),
      })),
    };
    const modelPath = `/v2/models/${args.model}`;

    async function infer(req, body) {
      const { request, feeds } = parseRequest(req, body);
      const requested = Array.isArray(request.outputs) && request.outputs.length > 0
        ? request.outputs
        : session.outputNames.map((name) => ({ name }));
      const binaryDefault = Boolean(request.parameters && request.parameters.binary_data_output);
      const results = await session.run(feeds, requested.map((o) => o.name));
      const outputs = [];
      const blobs = [];
      for (const o of requested) {
        const t = results[o.name];
        const datatype = FROM_ORT[t.type];
        const entry = { name: o.name, datatype, shape: t.dims };
        const binary = o.parameters && o.parameters.binary_data !== undefined ? o.parameters.binary_data : binaryDefault;
        if (binary) {
          const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
          entry.parameters = { binary_data_size: bytes.length };
          blobs.push(bytes);
        } else {
          entry.data = Array.from(t.data, (v) => (typeof v === 'bigint' ? Number(v) : v));
        }
        outputs.push(entry);
      }
      const response = { model_name: args.model, model_version: version, outputs };
      if (request.id !== undefined) response.id = request.id;
      const json = Buffer.from(JSON.stringify(response));
      if (blobs.length === 0) return { headers: { 'Content-Type': 'application/json' }, body: json };
      return {
        headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': json.length },
        body: Buffer.concat([json, ...blobs]),
      };
    }

    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', async () => {
        const url = req.url.split('?')[0];
        const send = (status, headers, body) => {
          res.writeHead(status, { ...headers, 'Content-Length': body.length });
          res.end(body);
        };
        const sendJson = (status, obj) => send(status, { 'Content-Type': 'application/json' }, Buffer.from(JSON.stringify(obj)));
        try {
          if (req.method === 'GET' && (url === '/v2/health/live' || url === '/v2/health/ready')) return send(200, {}, Buffer.alloc(0));
          if (req.method === 'GET' && (url === modelPath || url === `${modelPath}/versions/${version}`)) return sendJson(200, metadata);
          if (req.method === 'GET' && url === `${modelPath}/ready`) return send(200, {}, Buffer.alloc(0));
          if (req.method === 'POST' && (url === `${modelPath}/infer` || url === `${modelPath}/versions/${version}/infer`)) {
            const r = await infer(req, Buffer.concat(chunks));
            return send(200, r.headers, r.body);
          }
          return sendJson(404, { error: `no route for ${req.method} ${url}` });
        } catch (e) {
          return sendJson(e.status || 500, { error: e.message });
        }
      });
    });
    server.keepAliveTimeout = 60000;
    server.listen(args.port, args.host, () => {
      const port = server.address().port;
      console.error(`peer: ${args.model} v${version} on http://${args.host}:${port} (onnxruntime-node ${ort.env.versions.node}, ${args.threads} intra-op thread(s), no batching)`);
      if (args.portFile) fs.writeFileSync(args.portFile, `http=${port}\n`);
    });
    const stop = () => server.close(() => process.exit(0));
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }).catch((e) => {
    console.error(`peer: cannot load ${modelFile}: ${e.message}`);
    process.exit(1);
  });
}

main();
