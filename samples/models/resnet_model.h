// ResNet (torchvision's resnet18/34/50/101/152) written with kiln::nn, shared by the inference
// sample (samples/models/resnet.cpp) and the training sample (samples/training/train_resnet.cpp):
// a 7x7 stem with batch norm and max pooling, four stages of residual blocks (basic 3x3 pairs or
// 1x1-3x3-1x1 bottlenecks, the stride on the 3x3 as torchvision's v1.5), global average pooling
// and a linear classifier. Parameters carry torchvision's state dict names
// ("layer1.0.conv1.weight", "layer2.0.downsample.1.running_var", ...), so
// `safetensors.torch.save_file(model.state_dict(), ...)` on the torch side gives weights it loads.
//
// Inference (operator()) normalises with the batch norms' running statistics, as torch after
// eval(); train() is torch's train() mode: the batch's statistics, and the model comes back with
// its running statistics updated. parameters() are what an optimizer trains (torch's
// model.parameters()); the running statistics are not among them (torch's buffers).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <kiln/kiln.h>

namespace resnet {

using namespace kiln;

struct Config {
  bool bottleneck = true;
  std::vector<int64_t> blocks{1, 1, 1, 1};
  int64_t classes = 10;
  int64_t size = 32;   // the side of the images it is meant for (the samples' default --size)
  int64_t width = 64;  // the stem's and the first stage's width, doubled by each stage (torchvision: 64)
  int64_t expansion() const { return bottleneck ? 4 : 1; }

  // tiny: small at a quarter of the width (widths 16 to 128), for tests on slow devices; small:
  // bottleneck blocks, one per stage, 10 classes, 32x32 images (torchvision's
  // ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10)); resnet18 and resnet50: torchvision's,
  // 1000 classes, 224x224 images.
  static Config named(const std::string& name) {
    if (name == "tiny") return Config{true, {1, 1, 1, 1}, 10, 32, 16};
    if (name == "small") return Config{};
    if (name == "resnet18") return Config{false, {2, 2, 2, 2}, 1000, 224};
    if (name == "resnet50") return Config{true, {3, 4, 6, 3}, 1000, 224};
    fail("--config is tiny, small, resnet18 or resnet50, not '", name, "'");
  }
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
  // Inference when `next` is null; else training mode, with the batch norm (running statistics
  // moved towards this batch's) stored in *next.
  Tensor forward(const Tensor& x, ConvNorm* next) const {
    if (next == nullptr) return norm(conv(x));
    auto [y, trained] = norm.train(conv(x));
    next->norm = std::move(trained);
    return y;
  }
  // The trainable tensors in a fixed order: the convolution's weight (and bias), the batch
  // norm's weight and bias. Self is ConvNorm or const ConvNorm; f takes a Tensor of its
  // constness.
  template <class Self, class F>
  static void each_parameter(Self& self, F&& f) {
    f(self.conv.weight);
    for (auto* t : {&self.conv.bias, &self.norm.weight, &self.norm.bias})
      if (t->has_value()) f(**t);
  }

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
  // `next` as ConvNorm::forward's: null for inference, else the block with its batch norms
  // updated (a copy of this one).
  Tensor forward(const Tensor& x, Block* next) const {
    Tensor y = x;
    for (size_t i = 0; i < convs.size(); ++i) {
      y = convs[i].forward(y, next ? &next->convs[i] : nullptr);
      if (i + 1 < convs.size()) y = relu(y);
    }
    return relu(y + (downsample.empty() ? x : downsample[0].forward(x, next ? &next->downsample[0] : nullptr)));
  }
  template <class Self, class F>
  static void each_parameter(Self& self, F&& f) {
    for (auto& c : self.convs) ConvNorm::each_parameter(c, f);
    for (auto& d : self.downsample) ConvNorm::each_parameter(d, f);
  }
  template <class Self, class F>
  static void each_norm(Self& self, F&& f) {
    for (auto& c : self.convs) f(c.norm);
    for (auto& d : self.downsample) f(d.norm);
  }
};

struct Model {
  ConvNorm stem;
  std::vector<std::vector<Block>> stages;  // layer1 .. layer4
  nn::Linear fc;

  // Each stage's blocks, widths c.width (64) times 1, 2, 4, 8, the first block of stages 2-4 with
  // stride 2.
  template <class MakeBlock>
  static std::vector<std::vector<Block>> build(const Config& c, MakeBlock&& block) {
    std::vector<std::vector<Block>> stages;
    int64_t in = c.width;
    for (size_t stage = 0; stage < c.blocks.size(); ++stage) {
      const int64_t width = c.width << stage;
      std::vector<Block> blocks;
      for (int64_t i = 0; i < c.blocks[stage]; ++i) {
        blocks.push_back(block(stage, i, in, width, i == 0 && stage > 0 ? 2 : 1));
        in = width * c.expansion();
      }
      stages.push_back(std::move(blocks));
    }
    return stages;
  }
  static int64_t features(const Config& c) { return (c.width << (c.blocks.size() - 1)) * c.expansion(); }

  static Model make(const Config& c, nn::Init& init) {
    Model m{ConvNorm::make(3, c.width, 7, 2, init), {}, {}};
    m.stages = build(c, [&](size_t, int64_t, int64_t in, int64_t width, int64_t stride) {
      return Block::make(c, in, width, stride, init);
    });
    m.fc = nn::Linear::make(features(c), c.classes, init);
    return m;
  }
  static Model load(const StateDict& s, const Config& c) {
    Model m{ConvNorm::load(s, "conv1.", "bn1.", 3, c.width, 7, 2), {}, {}};
    m.stages = build(c, [&](size_t stage, int64_t i, int64_t in, int64_t width, int64_t stride) {
      return Block::load(s, "layer" + std::to_string(stage + 1) + "." + std::to_string(i) + ".", c, in, width, stride);
    });
    m.fc = nn::Linear::load(s, "fc.", features(c), c.classes);
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

  // Inference: images [B, 3, H, W] -> logits [B, classes], the batch norms' running statistics.
  Tensor operator()(const Tensor& x) const { return forward(x, nullptr); }
  // Training mode: the logits with the batch's statistics, and this model with every batch
  // norm's running statistics moved towards them (torch's momentum 0.1; its parameters are
  // these). Gradients flow through the batch statistics, not into the running ones.
  std::pair<Tensor, Model> train(const Tensor& x) const {
    Model next = *this;
    Tensor logits = forward(x, &next);
    return {std::move(logits), std::move(next)};
  }

  // What an optimizer trains, in a fixed order: every convolution's weight, every batch norm's
  // weight and bias, the classifier's weight and bias (torch's model.parameters(), in another
  // order); not the running statistics.
  std::vector<Tensor> parameters() const {
    std::vector<Tensor> p;
    each_parameter(*this, [&](const Tensor& t) { p.push_back(t); });
    return p;
  }
  // This model with parameters() replaced by `p` (new values, or the leaves an eager loop
  // trains), running statistics kept.
  Model with_parameters(const std::vector<Tensor>& p) const {
    Model m = *this;
    size_t k = 0;
    each_parameter(m, [&](Tensor& t) {
      KILN_CHECK(k < p.size(), "resnet::Model::with_parameters: got ", p.size(), " tensors for more parameters");
      KILN_CHECK(p[k].shape() == t.shape(), "resnet::Model::with_parameters: tensor ", k, " has shape ",
                 shape_str(p[k].shape()), " where the parameter's is ", shape_str(t.shape()));
      t = p[k++];
    });
    KILN_CHECK(k == p.size(), "resnet::Model::with_parameters: got ", p.size(), " tensors for ", k, " parameters");
    return m;
  }
  // Every batch norm's running mean and variance, in a fixed order (torch's buffers but
  // num_batches_tracked): what a training step returns besides the loss when its gradients are
  // taken from outside (train_resnet --mode outside).
  std::vector<Tensor> running_stats() const {
    std::vector<Tensor> r;
    each_norm(*this, [&](const nn::BatchNorm2d& n) {
      r.push_back(n.running_mean);
      r.push_back(n.running_var);
    });
    return r;
  }
  // This model with running_stats() replaced by `r`, parameters kept.
  Model with_running_stats(const std::vector<Tensor>& r) const {
    Model m = *this;
    size_t k = 0;
    each_norm(m, [&](nn::BatchNorm2d& n) {
      KILN_CHECK(k + 2 <= r.size(), "resnet::Model::with_running_stats: got ", r.size(), " tensors for more statistics");
      n.running_mean = r[k++];
      n.running_var = r[k++];
    });
    KILN_CHECK(k == r.size(), "resnet::Model::with_running_stats: got ", r.size(), " tensors for ", k, " statistics");
    return m;
  }

 private:
  Tensor forward(const Tensor& x, Model* next) const {
    Tensor h = max_pool2d(relu(stem.forward(x, next ? &next->stem : nullptr)), {3, 3}, {2, 2}, {1, 1});
    for (size_t s = 0; s < stages.size(); ++s)
      for (size_t i = 0; i < stages[s].size(); ++i) h = stages[s][i].forward(h, next ? &next->stages[s][i] : nullptr);
    return fc(flatten(adaptive_avg_pool2d(h, {1, 1}), 1));
  }
  template <class Self, class F>
  static void each_parameter(Self& self, F&& f) {
    ConvNorm::each_parameter(self.stem, f);
    for (auto& stage : self.stages)
      for (auto& b : stage) Block::each_parameter(b, f);
    f(self.fc.weight);
    if (self.fc.bias.has_value()) f(*self.fc.bias);
  }
  template <class Self, class F>
  static void each_norm(Self& self, F&& f) {
    f(self.stem.norm);
    for (auto& stage : self.stages)
      for (auto& b : stage) Block::each_norm(b, f);
  }
};

}  // namespace resnet

KILN_PYTREE(resnet::ConvNorm, &resnet::ConvNorm::conv, &resnet::ConvNorm::norm);
KILN_PYTREE(resnet::Block, &resnet::Block::convs, &resnet::Block::downsample);
KILN_PYTREE(resnet::Model, &resnet::Model::stem, &resnet::Model::stages, &resnet::Model::fc);
