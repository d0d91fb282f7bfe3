// ResNet (torchvision's resnet18/34/50/101/152, inference) written with kiln::nn: a 7x7 stem with
// batch norm and max pooling, four stages of residual blocks (basic 3x3 pairs or 1x1-3x3-1x1
// bottlenecks, the stride on the 3x3 as torchvision's v1.5), global average pooling and a linear
// classifier. Parameters carry torchvision's state dict names ("layer1.0.conv1.weight",
// "layer2.0.downsample.1.running_var", ...), so `safetensors.torch.save_file(model.state_dict(),
// ...)` on the torch side gives weights it loads (tools/models/model_reference.py --model
// resnet50; batch norm uses its running statistics, as after eval()).
//
//   resnet [--config small|resnet18|resnet50] [--batch B] [--size S] + model_sample.h's options
//
// --config small (the default): bottleneck blocks, one per stage, 10 classes, 32x32 images
// (torchvision's ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10)); resnet18 and resnet50 are
// torchvision's with 1000 classes and 224x224 images. Input: images [B, 3, S, S]; output: logits
// [B, classes].
#include <string>
#include <vector>

#include "model_sample.h"

using namespace kiln;

namespace resnet {

struct Config {
  bool bottleneck = true;
  std::vector<int64_t> blocks{1, 1, 1, 1};
  int64_t classes = 10;
  int64_t expansion() const { return bottleneck ? 4 : 1; }
};

// A convolution without bias followed by its batch norm (torchvision's conv + bn pairs).
struct ConvNorm {
  nn::Conv2d conv;
  nn::BatchNorm2d norm;
  static ConvNorm make(int64_t in, int64_t out, int64_t kernel, int64_t stride, nn::Init& init) {
    return ConvNorm{nn::Conv2d::make(in, out, {kernel, kernel}, init, options(kernel, stride)),
                    nn::BatchNorm2d::make(out, init)};
  }
  static ConvNorm load(const StateDict& s, const std::string& conv_prefix, const std::string& norm_prefix, int64_t in,
                       int64_t out, int64_t kernel, int64_t stride) {
    return ConvNorm{nn::Conv2d::load(s, conv_prefix, in, out, {kernel, kernel}, options(kernel, stride)),
                    nn::BatchNorm2d::load(s, norm_prefix, out)};
  }
  void save(StateDict& s, const std::string& conv_prefix, const std::string& norm_prefix) const {
    conv.save(s, conv_prefix);
    norm.save(s, norm_prefix);
  }
  Tensor operator()(const Tensor& x) const { return norm(conv(x)); }

 private:
  static nn::ConvOptions options(int64_t kernel, int64_t stride) {
    nn::ConvOptions o;
    o.stride = {stride, stride};
    o.padding = {kernel / 2, kernel / 2};
    o.bias = false;
    return o;
  }
};

// Basic: relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut); bottleneck: 1x1 down to the
// block's width, 3x3 (with the stride), 1x1 up to width * 4. The shortcut is a strided 1x1
// conv + bn where the shape changes.
struct Block {
  std::vector<ConvNorm> convs;            // conv1/bn1, conv2/bn2[, conv3/bn3]
  std::vector<ConvNorm> downsample;       // none, or downsample.0 / downsample.1

  static Block make(const Config& c, int64_t in, int64_t width, int64_t stride, nn::Init& init) {
    Block b;
    const int64_t out = width * c.expansion();
    if (c.bottleneck) {
      b.convs = {ConvNorm::make(in, width, 1, 1, init), ConvNorm::make(width, width, 3, stride, init),
                 ConvNorm::make(width, out, 1, 1, init)};
    } else {
      b.convs = {ConvNorm::make(in, width, 3, stride, init), ConvNorm::make(width, width, 3, 1, init)};
    }
    if (stride != 1 || in != out) b.downsample = {ConvNorm::make(in, out, 1, stride, init)};
    return b;
  }
  static Block load(const StateDict& s, const std::string& p, const Config& c, int64_t in, int64_t width,
                    int64_t stride) {
    Block b;
    const int64_t out = width * c.expansion();
    auto pair = [&](int i, int64_t from, int64_t to, int64_t kernel, int64_t st) {
      const std::string n = std::to_string(i);
      return ConvNorm::load(s, p + "conv" + n + ".", p + "bn" + n + ".", from, to, kernel, st);
    };
    if (c.bottleneck) {
      b.convs = {pair(1, in, width, 1, 1), pair(2, width, width, 3, stride), pair(3, width, out, 1, 1)};
    } else {
      b.convs = {pair(1, in, width, 3, stride), pair(2, width, width, 3, 1)};
    }
    if (stride != 1 || in != out)
      b.downsample = {ConvNorm::load(s, p + "downsample.0.", p + "downsample.1.", in, out, 1, stride)};
    return b;
  }
  void save(StateDict& s, const std::string& p) const {
    for (size_t i = 0; i < convs.size(); ++i)
      convs[i].save(s, p + "conv" + std::to_string(i + 1) + ".", p + "bn" + std::to_string(i + 1) + ".");
    for (const ConvNorm& d : downsample) d.save(s, p + "downsample.0.", p + "downsample.1.");
  }
  Tensor operator()(const Tensor& x) const {
    Tensor y = x;
    for (size_t i = 0; i < convs.size(); ++i) y = i + 1 < convs.size() ? relu(convs[i](y)) : convs[i](y);
    return relu(y + (downsample.empty() ? x : downsample[0](x)));
  }
};

struct Model {
  ConvNorm stem;
  std::vector<std::vector<Block>> stages;  // layer1 .. layer4
  nn::Linear fc;

  // Each stage's blocks, widths 64, 128, 256, 512, the first block of stages 2-4 with stride 2.
  template <class MakeBlock>
  static std::vector<std::vector<Block>> build(const Config& c, MakeBlock&& block) {
    std::vector<std::vector<Block>> stages;
    int64_t in = 64;
    for (size_t stage = 0; stage < c.blocks.size(); ++stage) {
      const int64_t width = int64_t{64} << stage;
      std::vector<Block> blocks;
      for (int64_t i = 0; i < c.blocks[stage]; ++i) {
        blocks.push_back(block(stage, i, in, width, i == 0 && stage > 0 ? 2 : 1));
        in = width * c.expansion();
      }
      stages.push_back(std::move(blocks));
    }
    return stages;
  }
  int64_t features(const Config& c) const { return (int64_t{64} << (c.blocks.size() - 1)) * c.expansion(); }

  static Model make(const Config& c, nn::Init& init) {
    Model m{ConvNorm::make(3, 64, 7, 2, init), {}, {}};
    m.stages = build(c, [&](size_t, int64_t, int64_t in, int64_t width, int64_t stride) {
      return Block::make(c, in, width, stride, init);
    });
    m.fc = nn::Linear::make(m.features(c), c.classes, init);
    return m;
  }
  static Model load(const StateDict& s, const Config& c) {
    Model m{ConvNorm::load(s, "conv1.", "bn1.", 3, 64, 7, 2), {}, {}};
    m.stages = build(c, [&](size_t stage, int64_t i, int64_t in, int64_t width, int64_t stride) {
      return Block::load(s, "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".", c, in, width, stride);
    });
    m.fc = nn::Linear::load(s, "fc.", m.features(c), c.classes);
    return m;
  }
  StateDict state_dict() const {
    StateDict s;
    stem.save(s, "conv1.", "bn1.");
    for (size_t stage = 0; stage < stages.size(); ++stage)
      for (size_t i = 0; i < stages[stage].size(); ++i)
        stages[stage][i].save(s, "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".");
    fc.save(s, "fc.");
    return s;
  }
  // images [B, 3, H, W] -> logits [B, classes]
  Tensor operator()(const Tensor& x) const {
    Tensor h = max_pool2d(relu(stem(x)), {3, 3}, {2, 2}, {1, 1});
    for (const std::vector<Block>& stage : stages)
      for (const Block& b : stage) h = b(h);
    return fc(flatten(adaptive_avg_pool2d(h, {1, 1}), 1));
  }
};

}  // namespace resnet

KILN_PYTREE(resnet::ConvNorm, &resnet::ConvNorm::conv, &resnet::ConvNorm::norm);
KILN_PYTREE(resnet::Block, &resnet::Block::convs, &resnet::Block::downsample);
KILN_PYTREE(resnet::Model, &resnet::Model::stem, &resnet::Model::stages, &resnet::Model::fc);

int main(int argc, char** argv) {
  using samples::int_flag;
  resnet::Config c;
  int64_t size = 32;
  const std::string config = samples::flag(argc, argv, "--config", "small");
  if (config == "resnet18") c = resnet::Config{false, {2, 2, 2, 2}, 1000}, size = 224;
  else if (config == "resnet50") c = resnet::Config{true, {3, 4, 6, 3}, 1000}, size = 224;
  else if (config != "small") {
    std::fprintf(stderr, "resnet: --config is small, resnet18 or resnet50, not '%s'\n", config.c_str());
    return 2;
  }
  const int64_t batch = int_flag(argc, argv, "--batch", 2);
  size = int_flag(argc, argv, "--size", size);
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
