// Per-model default training settings.
#include "train/recipes.h"

#include "nn/model_zoo.h"

namespace dtrain {

TrainConfig recipe_for(const std::string& model) {
  TrainConfig c;
  c.model.name = model;
  if (model == "softmax") {
    // "MNIST for ML beginners": zero init, plain gradient descent, lr 0.5 on the mean
    // cross-entropy.
    c.optimizer.name = "sgd";
    c.learning_rate = 0.5f;
    c.lr_decay_rate = 1.0f;
    c.epochs = 5;
  } else if (model == "mlp") {
    // Kubeflow dist_mnist: 100 hidden units, Adam.
    c.optimizer.name = "adam";
    c.learning_rate = 0.001f;
    c.lr_decay_rate = 1.0f;
    c.epochs = 10;
  } else if (model == "mnist_inference") {
    // The TensorFlow book's mnist_train.py: SGD lr 0.8 decayed ×0.99 per epoch, L2 1e-4 (in the
    // model), moving average of the weights with decay 0.99 used for evaluation.
    c.optimizer.name = "sgd";
    c.learning_rate = 0.8f;
    c.lr_decay_rate = 0.99f;
    c.moving_average_decay = 0.99f;
    c.eval_moving_average = true;
    c.epochs = 10;
  } else if (model == "lenet") {
    // "Deep MNIST for experts", with Adam at 1e-3 instead of 1e-4 to converge in fewer epochs.
    c.optimizer.name = "adam";
    c.learning_rate = 0.001f;
    c.lr_decay_rate = 1.0f;
    c.epochs = 2;
  } else {
    make_model(c.model);  // throws the UsageError that lists the models
  }
  return c;
}

}  // namespace dtrain
