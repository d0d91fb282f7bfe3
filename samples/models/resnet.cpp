// ResNet (torchvision's resnet18/34/50/101/152, inference; the model: resnet_model.h). Weights
// saved from torchvision's state dict load by name (tools/models/model_reference.py --model
// resnet50); batch norm uses its running statistics, as after eval().
//
//   resnet [--config tiny|small|resnet18|resnet50] [--batch B] [--size S] + model_sample.h's options
//
// --config small (the default): bottleneck blocks, one per stage, 10 classes, 32x32 images
// (torchvision's ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10)); tiny: small at a quarter of
// the width; resnet18 and resnet50 are torchvision's with 1000 classes and 224x224 images.
// Input: images [B, 3, S, S]; output: logits [B, classes].
#include <string>

#include "model_sample.h"
#include "resnet_model.h"

using namespace kiln;

int main(int argc, char** argv) {
  using samples::int_flag;
  const std::string config = samples::flag(argc, argv, "--config", "small");
  const resnet::Config c = samples::or_exit("resnet", [&] { return resnet::Config::named(config); });
  const int64_t batch = int_flag(argc, argv, "--batch", 2);
  const int64_t size = int_flag(argc, argv, "--size", c.size);
  samples::ModelSample<resnet::Model> sample;
  sample.name = "resnet";
  sample.summary = config + " (" + (c.bottleneck ? "bottleneck" : "basic") + " blocks), " +
                   std::to_string(c.classes) + " classes; images [" + std::to_string(batch) + ", 3, " +
                   std::to_string(size) + ", " + std::to_string(size) + "]";
  sample.make = [c](nn::Init& init) { return resnet::Model::make(c, init); };
  sample.load = [c](const StateDict& s) { return resnet::Model::load(s, c); };
  sample.example_input = [batch, size](Device device) {
    nn::Init pixels(1, DType::f32, device);
    return pixels.normal({batch, 3, size, size});
  };
  return samples::run(sample, argc, argv);
}
