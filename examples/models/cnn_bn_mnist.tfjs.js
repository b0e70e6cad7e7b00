// Writes cnn_bn_mnist.tfjs.json with TensorFlow.js itself, as `model.save()` writes a model.json
// (the topology, without the weights file, which dtrain does not read): a Sequential CNN on 28x28x1
// images, (Conv2D 3x3 same → BatchNormalization → ReLU → MaxPooling2D 2) with 16 then 32 filters,
// momentum 0.99 then 0.9, → Flatten → Dense 10 softmax. An independent writer for dtrain's reader.
//
// Usage (npm's @tensorflow/tfjs, pure JavaScript; not tfjs-node, whose native part is a download):
//   mkdir -p /tmp/tfjs && (cd /tmp/tfjs && npm install @tensorflow/tfjs@4.22.0)
//   NODE_PATH=/tmp/tfjs/node_modules node examples/models/cnn_bn_mnist.tfjs.js \
//       > examples/models/cnn_bn_mnist.tfjs.json
'use strict';
const tf = require('@tensorflow/tfjs');

async function main() {
  const model = tf.sequential({name: 'cnn_bn_tfjs'});
  const block = (n, filters, momentum, first) => {
    model.add(tf.layers.conv2d({
      ...(first ? {inputShape: [28, 28, 1]} : {}),
      filters, kernelSize: 3, padding: 'same', name: `conv${n}`}));
    model.add(tf.layers.batchNormalization({momentum, name: `bn${n}`}));
    model.add(tf.layers.activation({activation: 'relu', name: `relu${n}`}));
    model.add(tf.layers.maxPooling2d({poolSize: 2, name: `pool${n}`}));
  };
  block(1, 16, 0.99, true);
  block(2, 32, 0.9, false);
  model.add(tf.layers.flatten({name: 'flatten'}));
  model.add(tf.layers.dense({units: 10, activation: 'softmax', name: 'dense'}));
  // What tf.io's file handlers write to model.json, less the manifest of the weights file.
  await model.save(tf.io.withSaveHandler(async (artifacts) => {
    const json = {modelTopology: artifacts.modelTopology, format: artifacts.format,
                  generatedBy: artifacts.generatedBy, convertedBy: artifacts.convertedBy};
    process.stdout.write(JSON.stringify(json) + '\n');
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
}

main().catch((error) => {
  console.error(`cnn_bn_mnist.tfjs.js: ${error.message}`);
  process.exit(1);
});
