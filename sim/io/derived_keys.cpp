// Which keys the resolved scenario marks as derived, and reading that mark back.
#include "io/derived_keys.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <boost/json.hpp>
#include <string_view>

#include "io/json_document.hpp"
#include "io/reader.hpp"
#include "io/scenario_loader.hpp"
#include "io/scenario_schema.hpp"
#include "stepsim/error.hpp"

namespace stepsim::io {
namespace json = boost::json;
namespace {

// Every key that follows others unless a layer of the scenario gives it, in the resolved
// scenario's order, with whether `s` gave it. The zero keys: 0 derives them (io/validate.cpp's
// complete_model and size_cluster). The others: training.framework sets the kernel keys
// (io/scenario_schema.cpp) and, for a mixture of experts under Megatron-Core, parallel.etp to
// parallel.tp (io/validate.cpp); main_grad and grad_reduce_dtype follow each other and the
// framework, gradient_as_bucket_view and overlap_grad_reduce the framework and the kind,
// sequence_parallel the framework and tp, reshard_after_forward the framework, the kind and pp,
// fsdp_version the framework, and first_bucket_mb bucket_cap_mb, whose being given is what
// decides it (io/validate.cpp).
struct Derivable {
  std::string_view key;
  bool (*given)(const Scenario&, const ZeroKeys&);
};

constexpr Derivable kDerivable[] = {
    {"model.kv_heads", [](const Scenario&, const ZeroKeys& z) { return z.kv_heads; }},
    {"model.ffn_hidden", [](const Scenario&, const ZeroKeys& z) { return z.ffn_hidden; }},
    // Left at 0 on a dense model, where 0 is written and reads back the same.
    {"model.moe.expert_ffn_hidden",
     [](const Scenario& s, const ZeroKeys& z) { return z.expert_ffn_hidden || s.model.moe.expert_ffn_hidden == 0; }},
    {"cluster.nodes", [](const Scenario&, const ZeroKeys& z) { return z.nodes; }},
    {"parallel.etp", [](const Scenario& s, const ZeroKeys&) { return s.parallel.etp_given; }},
    {"parallel.sequence_parallel",
     [](const Scenario& s, const ZeroKeys&) { return s.parallel.sequence_parallel_given; }},
    {"training.attention", [](const Scenario& s, const ZeroKeys&) { return s.training.attention_given; }},
    {"training.main_grad", [](const Scenario& s, const ZeroKeys&) { return s.training.main_grad_given; }},
    {"training.fusion", [](const Scenario& s, const ZeroKeys&) { return s.training.fusion_given; }},
    {"training.cross_entropy", [](const Scenario& s, const ZeroKeys&) { return s.training.cross_entropy_given; }},
    {"training.grad_clip", [](const Scenario& s, const ZeroKeys&) { return s.training.grad_clip_given; }},
    {"training.fp8_scaling", [](const Scenario& s, const ZeroKeys&) { return s.training.fp8_scaling_given; }},
    {"data_parallel.bucket_cap_mb",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.bucket_cap_mb_given; }},
    {"data_parallel.first_bucket_mb",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.first_bucket_mb_given; }},
    {"data_parallel.overlap_grad_reduce",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.overlap_grad_reduce_given; }},
    {"data_parallel.gradient_as_bucket_view",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.gradient_as_bucket_view_given; }},
    {"data_parallel.grad_reduce_dtype",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.grad_reduce_dtype_given; }},
    {"data_parallel.fsdp_version",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.fsdp_version_given; }},
    {"data_parallel.reshard_after_forward",
     [](const Scenario& s, const ZeroKeys&) { return s.data_parallel.reshard_after_forward_given; }},
};

std::string pointer_of(std::string_view key) {
  std::string pointer = "/";
  for (const char c : key) pointer += c == '.' ? '/' : c;
  return pointer;
}

// The object holding `key` ("a.b.c": document.a.b) and the key's last name; null where a
// section on the way is no object (a preset name), which then gives the key no value to take.
json::object* holder_of(json::value& document, std::string_view key, std::string_view& last) {
  json::value* at = &document;
  std::size_t start = 0;
  for (std::size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', start)) {
    json::object* object = at->if_object();
    if (object == nullptr) return nullptr;
    at = object->if_contains(key.substr(start, dot - start));
    if (at == nullptr) return nullptr;
    start = dot + 1;
  }
  last = key.substr(start);
  return at->if_object();
}

std::vector<std::string> listed_keys(const json::value& list, const std::string& source) {
  std::vector<std::string_view> known;
  for (const Derivable& d : kDerivable) known.push_back(d.key);
  const auto fail = [&](const std::string& where, const std::string& what) {
    throw InputError(source, where,
                     fmt::format("{}: derived lists the keys that follow other keys where not given ({})", what,
                                 fmt::join(known, ", ")));
  };
  if (!list.is_array()) fail("/derived", fmt::format("expected a list of key names, got {}", describe_value(list)));
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < list.get_array().size(); ++i) {
    const json::value& v = list.get_array()[i];
    const std::string where = fmt::format("/derived/{}", i);
    if (!v.is_string()) fail(where, fmt::format("expected a key name, got {}", describe_value(v)));
    const std::string_view key = v.get_string();
    if (std::ranges::find(known, key) == known.end()) fail(where, fmt::format("'{}' is not one of them", key));
    keys.emplace_back(key);
  }
  return keys;
}

// The value at `key` of a scenario document; null where it has none.
json::value value_at(const json::value& written, std::string_view key) {
  boost::system::error_code ec;
  const json::value* v = written.find_pointer(pointer_of(key), ec);
  return v != nullptr ? *v : json::value(nullptr);
}

std::string text_of(const json::value& v) { return v.is_number() ? number_text(v) : json::serialize(v); }

// A listed key whose value the rest of the file does not derive was edited: refused rather than
// silently replaced. A file that does not load on its own is left to the load with its --set
// assignments, which says what is wrong.
void check_values(const json::value& document, const json::value& stripped, const std::vector<std::string>& keys,
                  const std::string& source) {
  Scenario as_given;
  read_scenario(as_given, document, Reader(source, false));
  const json::value shown = write_scenario(as_given);
  json::value derived;
  try {
    derived = write_scenario(load_scenario_text(json::serialize(stripped), source));
  } catch (const InputError&) {
    return;
  }
  for (const auto& key : keys) {
    const json::value given = value_at(shown, key);
    const json::value again = value_at(derived, key);
    if (value_at(document, key).is_null() || given == again) continue;
    throw InputError(source, pointer_of(key),
                     fmt::format("is {}, but derived lists {} as following the other keys, which give {}: take it out "
                                 "of derived to keep {}",
                                 text_of(given), key, text_of(again), text_of(given)));
  }
}

}  // namespace

ZeroKeys given_zero_keys(const Scenario& s) {
  return {s.model.kv_heads != 0, s.model.ffn_hidden != 0, s.model.moe.expert_ffn_hidden != 0, s.cluster.nodes != 0};
}

std::vector<std::string> derived_keys(const Scenario& s, const ZeroKeys& given) {
  std::vector<std::string> out;
  for (const Derivable& d : kDerivable)
    if (!d.given(s, given)) out.emplace_back(d.key);
  return out;
}

void take_derived(json::value& document, const std::string& source) {
  json::object& top = document.as_object();
  const json::value* list = top.if_contains("derived");
  if (list == nullptr) return;
  const std::vector<std::string> keys = listed_keys(*list, source);
  top.erase("derived");
  json::value stripped = document;
  for (const auto& key : keys) {
    std::string_view last;
    if (json::object* holder = holder_of(stripped, key, last)) holder->erase(last);
  }
  check_values(document, stripped, keys, source);
  document = std::move(stripped);
}

}  // namespace stepsim::io
