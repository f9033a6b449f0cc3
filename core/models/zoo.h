// Constructors of the four reference models of docs/cli.md (one source file each).
#pragma once
#include <memory>

#include "core/models/model.h"

namespace dd::models {
class ModelSpec;
// mlp reads its one option (width) from the spec; make_model calls spec.finish().
std::unique_ptr<Model> make_mlp(ModelSpec& spec, uint64_t seed, ops::Device& dev);
std::unique_ptr<Model> make_cnn(uint64_t seed, ops::Device& dev);
std::unique_ptr<Model> make_resnet20(uint64_t seed, ops::Device& dev);
std::unique_ptr<Model> make_gpt_mini(uint64_t seed, ops::Device& dev);
// The decoder families parse their options from the spec (docs/models.md) and call spec.finish().
std::unique_ptr<Model> make_gpt2(ModelSpec& spec, uint64_t seed, ops::Device& dev);
std::unique_ptr<Model> make_llama(ModelSpec& spec, uint64_t seed, ops::Device& dev);
// resnet18 / resnet50 with their options (image, classes); calls spec.finish() before allocating.
std::unique_ptr<Model> make_resnet(ModelSpec& spec, uint64_t seed, ops::Device& dev);
}  // namespace dd::models
