// Runs an ONNX model exported by `dtrain export` on the MNIST test set with ONNX Runtime
// (npm onnxruntime-node, installed by scripts/fetch_onnxruntime.sh): an independent check of the
// graph, its layouts and its weights. The images are read from the IDX files here, scaled
// uint8 / 255 as dtrain scales them, and fed in batches in the model's input shape (NHWC).
//
// Usage: node onnx_run.js [--raw] MODEL.onnx IMAGES_IDX LABELS_IDX LOGITS.csv [PREDICT.csv]
//   (NODE_PATH must name the node_modules folder holding onnxruntime-node)
//   --raw: feed the bytes as they are (0-255), for a model whose graph applies dtrain's
//   --feature_scale itself (metadata dtrain.feature_scale_in_graph = true).
// Writes LOGITS.csv ("index,class,logit_0,...", 9 significant digits) and prints one JSON line:
// {"records": N, "accuracy": A, "input": "input", "input_shape": [...], "output": "logits"},
// with "max_logit_difference" from the logit_k columns of PREDICT.csv (`dtrain predict --logits`)
// when it is given.
'use strict';
const fs = require('fs');
const ort = require('onnxruntime-node');

function readIdx(path) {
  const bytes = fs.readFileSync(path);
  if (bytes[0] !== 0 || bytes[1] !== 0 || bytes[2] !== 0x08) {
    throw new Error(`${path}: not an IDX file of unsigned bytes`);
  }
  const rank = bytes[3];
  const dims = [];
  for (let i = 0; i < rank; ++i) dims.push(bytes.readUInt32BE(4 + 4 * i));
  return {dims, data: bytes.subarray(4 + 4 * rank)};
}

async function main() {
  const args = process.argv.slice(2);
  const raw = args[0] === '--raw';
  const [modelPath, imagesPath, labelsPath, logitsPath, predictPath] = raw ? args.slice(1) : args;
  if (!logitsPath) throw new Error('usage: onnx_run.js MODEL.onnx IMAGES LABELS LOGITS.csv');
  const images = readIdx(imagesPath);
  const labels = readIdx(labelsPath);
  const count = images.dims[0];
  const exampleSize = images.dims.slice(1).reduce((a, b) => a * b, 1);
  if (labels.dims[0] !== count) throw new Error(`${labelsPath}: ${labels.dims[0]} labels`);

  const session = await ort.InferenceSession.create(modelPath);
  if (session.inputNames.length !== 1 || session.outputNames.length !== 1) {
    throw new Error(`expected one input and one output, got ${session.inputNames} -> ${session.outputNames}`);
  }
  const inputName = session.inputNames[0];
  const outputName = session.outputNames[0];
  // The model's input shape after the batch, from the graph itself.
  const shape = session.inputMetadata[0].shape.slice(1);
  if (shape.reduce((a, b) => a * b, 1) !== exampleSize) {
    throw new Error(`model input ${shape} does not hold ${exampleSize} values per image`);
  }

  const all = [];
  const out = fs.openSync(logitsPath, 'w');
  let header = false;
  let correct = 0;
  const batch = 1000;
  for (let begin = 0; begin < count; begin += batch) {
    const n = Math.min(batch, count - begin);
    const values = new Float32Array(n * exampleSize);
    for (let i = 0; i < values.length; ++i) {
      const byte = images.data[begin * exampleSize + i];
      values[i] = raw ? byte : byte / 255;
    }
    const feeds = {[inputName]: new ort.Tensor('float32', values, [n, ...shape])};
    const result = (await session.run(feeds))[outputName];
    const classes = result.dims[1];
    if (!header) {
      const names = Array.from({length: classes}, (_, k) => `logit_${k}`);
      fs.writeSync(out, `index,class,${names.join(',')}\n`);
      header = true;
    }
    let text = '';
    for (let i = 0; i < n; ++i) {
      const row = result.data.subarray(i * classes, (i + 1) * classes);
      all.push(Array.from(row));
      let best = 0;
      for (let k = 1; k < classes; ++k) if (row[k] > row[best]) best = k;
      if (best === labels.data[begin + i]) ++correct;
      text += `${begin + i},${best},${Array.from(row, (v) => v.toPrecision(9)).join(',')}\n`;
    }
    fs.writeSync(out, text);
  }
  fs.closeSync(out);
  const summary = {records: count, accuracy: correct / count, input: inputName,
                   input_shape: shape, output: outputName};
  if (predictPath) summary.max_logit_difference = maxLogitDifference(predictPath, all);
  console.log(JSON.stringify(summary));
}

// The largest |ONNX Runtime's logit - dtrain's| over every record and class.
function maxLogitDifference(predictPath, logits) {
  const lines = fs.readFileSync(predictPath, 'utf8').trim().split('\n');
  const columns = lines[0].split(',');
  const first = columns.indexOf('logit_0');
  if (first < 0) throw new Error(`${predictPath}: no logit_0 column (run dtrain predict --logits)`);
  if (lines.length - 1 !== logits.length) {
    throw new Error(`${predictPath}: ${lines.length - 1} records, ONNX Runtime ran ${logits.length}`);
  }
  let most = 0;
  for (let i = 0; i < logits.length; ++i) {
    const fields = lines[i + 1].split(',');
    for (let k = 0; k < logits[i].length; ++k)
      most = Math.max(most, Math.abs(Number(fields[first + k]) - logits[i][k]));
  }
  return most;
}

main().catch((error) => {
  console.error(`onnx_run.js: ${error.message}`);
  process.exit(1);
});
