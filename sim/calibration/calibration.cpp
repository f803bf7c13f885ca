// Calibration files: the strict reader (every value checked, every error with its JSON
// pointer) and the canonical writer.
#include "calibration/calibration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "calibration/apply.hpp"
#include "collectives/collective.hpp"
#include "io/json_document.hpp"
#include "stepsim/error.hpp"
#include "stepsim/input_files.hpp"

namespace stepsim::calibration {

namespace json = boost::json;

double AttentionPoint::flops() const {
  const double forward = 2.0 * static_cast<double>(batch) * static_cast<double>(heads) * static_cast<double>(seq) *
                         static_cast<double>(seq) * static_cast<double>(head_dim);
  return backward ? 2.5 * forward : forward;
}

namespace {

// One place in the file being read: its JSON pointer and the error it raises there.
struct Place {
  const std::string& file;
  std::string pointer;

  Place at(std::string_view key) const { return {file, pointer + "/" + std::string(key)}; }
  Place at(std::size_t i) const { return {file, pointer + "/" + std::to_string(i)}; }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(file, pointer.empty() ? "/" : pointer, what);
  }
};

const json::object& object_at(const json::value& v, const Place& p) {
  if (!v.is_object()) p.fail(fmt::format("expected an object, got {}", io::describe_value(v)));
  return v.get_object();
}

const json::array& array_at(const json::value& v, const Place& p) {
  if (!v.is_array()) p.fail(fmt::format("expected an array, got {}", io::describe_value(v)));
  return v.get_array();
}

// Rejects keys the format does not have: a misspelt key must not be silently ignored.
void only_keys(const json::object& o, const Place& p, std::initializer_list<std::string_view> keys) {
  for (const auto& kv : o) {
    if (std::find(keys.begin(), keys.end(), std::string_view(kv.key())) != keys.end()) continue;
    std::string expected;
    for (auto k : keys) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", k);
    p.at(kv.key()).fail(fmt::format("unknown key '{}' (expected one of {})", std::string_view(kv.key()), expected));
  }
}

const json::value& required(const json::object& o, const Place& p, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) p.fail(fmt::format("missing key '{}'", key));
  return *v;
}

// A plain number in the unit its key names; strings such as "40 us" are refused so that a
// file never mixes units.
double number(const json::value& v, const Place& p, const char* unit, double lo, double hi) {
  if (v.is_string())
    p.fail(fmt::format("expected a plain number of {} (the key names the unit), got {}", unit, io::describe_value(v)));
  if (!v.is_number()) p.fail(fmt::format("expected a number of {}, got {}", unit, io::describe_value(v)));
  const double x = v.to_number<double>();
  if (!(x >= lo && x <= hi)) p.fail(fmt::format("expected {} from {} to {}, got {}", unit, lo, hi, x));
  return x;
}

double number(const json::value& v, const Place& p, const ValueRange& r) { return number(v, p, r.unit, r.lo, r.hi); }

long long integer(const json::value& v, const Place& p, const char* what, long long lo, long long hi) {
  const double x = number(v, p, what, static_cast<double>(lo), static_cast<double>(hi));
  if (x != std::floor(x)) p.fail(fmt::format("expected a whole number of {}, got {}", what, x));
  return static_cast<long long>(x);
}

std::string text(const json::value& v, const Place& p) {
  if (!v.is_string()) p.fail(fmt::format("expected a string, got {}", io::describe_value(v)));
  return std::string(v.get_string());
}

template <class Enum, class Name>
Enum enum_value(const json::value& v, const Place& p, Enum first, Enum last, Name name) {
  const std::string t = text(v, p);
  std::string choices;
  for (int i = static_cast<int>(first); i <= static_cast<int>(last); ++i) {
    if (t == name(static_cast<Enum>(i))) return static_cast<Enum>(i);
    choices += fmt::format("{}{}", choices.empty() ? "" : ", ", name(static_cast<Enum>(i)));
  }
  p.fail(fmt::format("unknown value '{}' (expected one of {})", t, choices));
}

Precision precision(const json::value& v, const Place& p) {
  return enum_value(v, p, Precision::bf16, Precision::fp32, [](Precision x) { return std::string(to_string(x)); });
}

constexpr double kMaxUs = kKernelTimeUs.hi;
constexpr long long kMaxDim = 1LL << 24;

Provenance read_provenance(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"gpu", "gpu_count", "driver", "cuda", "nccl", "host", "date", "command", "sources"});
  Provenance out;
  out.gpu = text(required(o, p, "gpu"), p.at("gpu"));
  // The GPU check compares this name with the cluster's GPU: an empty one would pass any.
  if (out.gpu.find_first_not_of(" \t") == std::string::npos)
    p.at("gpu").fail(
        "expected the GPU the measurements ran on, as CUDA names it (e.g. \"NVIDIA H100 80GB HBM3\"), "
        "got an empty name");
  if (const auto* c = o.if_contains("gpu_count"))
    out.gpu_count = static_cast<int>(integer(*c, p.at("gpu_count"), "GPUs", 1, 1 << 20));
  for (auto [key, field] : {std::pair{"driver", &out.driver},
                            {"cuda", &out.cuda},
                            {"nccl", &out.nccl},
                            {"host", &out.host},
                            {"date", &out.date},
                            {"command", &out.command}}) {
    if (const auto* s = o.if_contains(key)) *field = text(*s, p.at(key));
  }
  if (const auto* s = o.if_contains("sources")) {
    const auto& a = array_at(*s, p.at("sources"));
    for (std::size_t i = 0; i < a.size(); ++i) out.sources.push_back(text(a[i], p.at("sources").at(i)));
  }
  return out;
}

GemmPoint read_gemm(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"m", "n", "k", "dtype", "time_us"});
  GemmPoint g;
  g.m = integer(required(o, p, "m"), p.at("m"), "rows", 1, kMaxDim);
  g.n = integer(required(o, p, "n"), p.at("n"), "columns", 1, kMaxDim);
  g.k = integer(required(o, p, "k"), p.at("k"), "elements", 1, kMaxDim);
  g.dtype = precision(required(o, p, "dtype"), p.at("dtype"));
  g.time_us = number(required(o, p, "time_us"), p.at("time_us"), kKernelTimeUs);
  return g;
}

AttentionPoint read_attention(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"pass", "batch", "heads", "kv_heads", "seq", "head_dim", "dtype", "time_us"});
  AttentionPoint a;
  const std::string pass = text(required(o, p, "pass"), p.at("pass"));
  if (pass != "forward" && pass != "backward")
    p.at("pass").fail(fmt::format("expected 'forward' or 'backward', got '{}'", pass));
  a.backward = pass == "backward";
  a.batch = integer(required(o, p, "batch"), p.at("batch"), "sequences", 1, kMaxDim);
  a.heads = integer(required(o, p, "heads"), p.at("heads"), "heads", 1, 1 << 16);
  a.kv_heads = integer(required(o, p, "kv_heads"), p.at("kv_heads"), "heads", 1, 1 << 16);
  a.seq = integer(required(o, p, "seq"), p.at("seq"), "tokens", 1, kMaxDim);
  a.head_dim = integer(required(o, p, "head_dim"), p.at("head_dim"), "elements", 1, 1 << 16);
  a.dtype = precision(required(o, p, "dtype"), p.at("dtype"));
  a.time_us = number(required(o, p, "time_us"), p.at("time_us"), kKernelTimeUs);
  if (a.heads % a.kv_heads != 0)
    p.at("kv_heads").fail(fmt::format("expected a divisor of heads ({}), got {}", a.heads, a.kv_heads));
  return a;
}

BandwidthPoint read_bandwidth(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"bytes", "gbytes_per_s"});
  return {number(required(o, p, "bytes"), p.at("bytes"), kMemoryBytes),
          number(required(o, p, "gbytes_per_s"), p.at("gbytes_per_s"), kMemoryGbps)};
}

FittedEfficiency read_efficiency(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p,
            {"gemm_max", "fp8_gemm_max", "gemm_half_flops", "gemm_half_k", "attention_max", "hbm", "comm_slowdown"});
  FittedEfficiency e;
  for (const EfficiencyField& f : kEfficiencyFields)
    if (const auto* x = o.if_contains(f.key)) e.*f.fitted = number(*x, p.at(f.key), f.unit, f.lo, f.hi);
  return e;
}

template <class T, class Read>
std::vector<T> read_list(const json::object& o, const Place& p, const char* key, Read read) {
  std::vector<T> out;
  const auto* v = o.if_contains(key);
  if (v == nullptr) return out;
  const auto& a = array_at(*v, p.at(key));
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(read(a[i], p.at(key).at(i)));
  return out;
}

ComputeTables read_compute(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"gemm", "attention", "memory", "launch_overhead_us", "dispatch_us", "comm_slowdown", "efficiency"});
  ComputeTables c;
  c.gemm = read_list<GemmPoint>(o, p, "gemm", read_gemm);
  c.attention = read_list<AttentionPoint>(o, p, "attention", read_attention);
  c.memory = read_list<BandwidthPoint>(o, p, "memory", read_bandwidth);
  if (const auto* x = o.if_contains("launch_overhead_us"))
    c.launch_overhead_us = number(*x, p.at("launch_overhead_us"), kHostCostUs);
  if (const auto* x = o.if_contains("dispatch_us")) c.dispatch_us = number(*x, p.at("dispatch_us"), kHostCostUs);
  if (const auto* x = o.if_contains("comm_slowdown")) c.comm_slowdown = number(*x, p.at("comm_slowdown"), kSlowdown);
  if (const auto* x = o.if_contains("efficiency")) c.efficiency = read_efficiency(*x, p.at("efficiency"));
  return c;
}

AlphaBeta read_fit(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"alpha_us", "algbw_gbps", "busbw_gbps", "max_error", "alpha_fitted"});
  AlphaBeta f;
  f.alpha_us = number(required(o, p, "alpha_us"), p.at("alpha_us"), "microseconds", 0, kMaxUs);
  f.algbw_gbps = number(required(o, p, "algbw_gbps"), p.at("algbw_gbps"), "GB/s", 1e-6, 1e6);
  if (const auto* x = o.if_contains("busbw_gbps")) f.busbw_gbps = number(*x, p.at("busbw_gbps"), "GB/s", 0, 1e6);
  if (const auto* x = o.if_contains("max_error")) f.max_error = number(*x, p.at("max_error"), "a fraction", 0, 1e6);
  if (const auto* x = o.if_contains("alpha_fitted")) {
    if (!x->is_bool()) p.at("alpha_fitted").fail(fmt::format("expected true or false, got {}", io::describe_value(*x)));
    f.alpha_fitted = x->get_bool();
  }
  return f;
}

// The fit is what its points give (fit_alpha_beta, as `calibrate import` and
// stepsim-calibrate write it): a fit edited apart from its points describes other data.
bool near(double a, double b) { return std::abs(a - b) <= 1e-6 * std::max(std::abs(a), std::abs(b)) + 1e-9; }

std::string fit_text(const AlphaBeta& f) {
  return fmt::format("alpha_us {:.9g}, algbw_gbps {:.9g}, busbw_gbps {:.9g}, max_error {:.9g}, alpha_fitted {}",
                     f.alpha_us, f.algbw_gbps, f.busbw_gbps, f.max_error, f.alpha_fitted);
}

void check_fit(const CollectiveTable& t, const Place& p) {
  const AlphaBeta want = fit_alpha_beta(t.points, t.op, t.ranks, 0.0);
  const AlphaBeta& got = t.fit;
  if (near(want.alpha_us, got.alpha_us) && near(want.algbw_gbps, got.algbw_gbps) &&
      near(want.busbw_gbps, got.busbw_gbps) && near(want.max_error, got.max_error) &&
      want.alpha_fitted == got.alpha_fitted)
    return;
  p.fail(fmt::format("expected the fit its points give ({}), got {}", fit_text(want), fit_text(got)));
}

// nccl-tests' type names (-d), as its logs and the writers name a table's data type, and the
// bytes of one element (nccl-tests' wordSize).
struct NcclType {
  const char* name;
  int bytes;
};
constexpr NcclType kNcclTypes[] = {{"int8", 1},   {"uint8", 1},    {"int32", 4},  {"uint32", 4},
                                   {"int64", 8},  {"uint64", 8},   {"half", 2},   {"float", 4},
                                   {"double", 8}, {"bfloat16", 2}, {"f8e4m3", 1}, {"f8e5m2", 1}};

std::string nccl_type_names() {
  std::string out;
  for (const NcclType& t : kNcclTypes) out += fmt::format("{}{}", out.empty() ? "" : ", ", t.name);
  return out;
}

std::string nccl_type(const json::value& v, const Place& p) {
  const std::string t = text(v, p);
  if (is_nccl_type(t)) return t;
  p.fail(fmt::format("unknown value '{}' (expected one of {})", t, nccl_type_names()));
}

CollectivePoint read_point(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"bytes", "time_us"});
  // nccl-tests sizes are whole bytes, and so is every size a writer writes.
  return {static_cast<double>(integer(required(o, p, "bytes"), p.at("bytes"), kCollectiveBytes.unit,
                                      static_cast<long long>(kCollectiveBytes.lo),
                                      static_cast<long long>(kCollectiveBytes.hi))),
          number(required(o, p, "time_us"), p.at("time_us"), kKernelTimeUs)};
}

CollectiveTable read_collective(const json::value& v, const Place& p) {
  const auto& o = object_at(v, p);
  only_keys(o, p, {"op", "ranks", "nodes", "ranks_per_node", "dtype", "algorithm", "protocol", "fit", "points"});
  CollectiveTable t;
  t.op = enum_value(required(o, p, "op"), p.at("op"), CollOp::allreduce, CollOp::sendrecv,
                    [](CollOp x) { return std::string(to_string(x)); });
  t.ranks = static_cast<int>(integer(required(o, p, "ranks"), p.at("ranks"), "ranks", 1, 1 << 20));
  t.nodes = static_cast<int>(integer(required(o, p, "nodes"), p.at("nodes"), "nodes", 1, 1 << 20));
  t.ranks_per_node = t.ranks / t.nodes;
  if (const auto* x = o.if_contains("ranks_per_node"))
    t.ranks_per_node = static_cast<int>(integer(*x, p.at("ranks_per_node"), "ranks", 1, 1 << 20));
  if (t.ranks_per_node * t.nodes != t.ranks)
    p.fail(fmt::format("ranks ({}) must be nodes ({}) times ranks_per_node ({})", t.ranks, t.nodes, t.ranks_per_node));
  if (const auto* x = o.if_contains("dtype")) t.dtype = nccl_type(*x, p.at("dtype"));
  // Named only when the run forced them (NCCL_ALGO, NCCL_PROTO); "auto" is the key left out.
  // Neither reaches point-to-point transfers, so their tables name neither.
  if (point_to_point(t.op))
    for (const char* key : {"algorithm", "protocol"})
      if (o.contains(key))
        p.at(key).fail(
            fmt::format("{} runs as point-to-point sends and receives, which NCCL_ALGO and NCCL_PROTO do "
                        "not touch; leave \"{}\" out",
                        to_string(t.op), key));
  if (const auto* x = o.if_contains("algorithm"))
    t.algorithm =
        collectives::to_string(enum_value(*x, p.at("algorithm"), Algorithm::ring, Algorithm::direct,
                                          [](Algorithm a) { return std::string(collectives::to_string(a)); }));
  if (const auto* x = o.if_contains("protocol"))
    t.protocol = collectives::to_string(enum_value(*x, p.at("protocol"), Protocol::ll, Protocol::simple,
                                                   [](Protocol a) { return std::string(collectives::to_string(a)); }));
  t.points = read_list<CollectivePoint>(o, p, "points", read_point);
  if (t.points.empty()) p.at("points").fail("expected at least one measured point");
  for (std::size_t i = 1; i < t.points.size(); ++i) {
    if (!(t.points[i].bytes > t.points[i - 1].bytes))
      p.at("points").at(i).at("bytes").fail(
          fmt::format("expected sizes in increasing order, got {} after {}", t.points[i].bytes, t.points[i - 1].bytes));
  }
  t.fit = read_fit(required(o, p, "fit"), p.at("fit"));
  check_fit(t, p.at("fit"));
  return t;
}

json::value fit_json(const AlphaBeta& f) {
  return {{"alpha_us", f.alpha_us},
          {"algbw_gbps", f.algbw_gbps},
          {"busbw_gbps", f.busbw_gbps},
          {"max_error", f.max_error},
          {"alpha_fitted", f.alpha_fitted}};
}

// What a GPU's name says of its SKU, empty where it says nothing: the family ("a100",
// "gh200"), the form factor ("sxm", "pcie", "nvl") and the memory ("80": GB).
struct Sku {
  std::string family, form, memory;
};

bool is_family(const std::string& w) {
  std::size_t letters = 0;
  while (letters < w.size() && std::isalpha(static_cast<unsigned char>(w[letters]))) ++letters;
  std::size_t digits = letters;
  while (digits < w.size() && std::isdigit(static_cast<unsigned char>(w[digits]))) ++digits;
  return letters >= 1 && letters <= 2 && digits - letters >= 2 && w.size() - digits <= 1;
}

// "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe" (CUDA's names) and
// "a100-sxm4-80gb", "a100-80g", "h200" (presets'). CUDA names the PCIe and NVL boards so;
// an H100 or H200 said to carry HBM3 otherwise is the SXM board.
Sku sku_of(const std::string& name) {
  Sku out;
  std::string word;
  bool hbm3 = false;
  auto take = [&] {
    if (word.empty()) return;
    if (out.family.empty() && is_family(word)) out.family = word;
    if (word.starts_with("sxm")) out.form = "sxm";
    if (word == "pcie" || word == "nvl") out.form = word;
    if (word.starts_with("hbm3")) hbm3 = true;
    const std::size_t d = word.find_first_not_of("0123456789");
    if (d > 0 && d != std::string::npos && (word.substr(d) == "gb" || word.substr(d) == "g"))
      out.memory = word.substr(0, d);
    word.clear();
  };
  for (unsigned char ch : name) {
    if (std::isalnum(ch)) {
      word.push_back(static_cast<char>(std::tolower(ch)));
    } else {
      take();
    }
  }
  take();
  if (out.form.empty() && hbm3) out.form = "sxm";
  return out;
}

// Two things a name may say: they differ only when both say them.
bool agree(const std::string& a, const std::string& b) { return a.empty() || b.empty() || a == b; }

std::string lower_alnum(const std::string& s) {
  std::string out;
  for (unsigned char ch : s)
    if (std::isalnum(ch)) out.push_back(static_cast<char>(std::tolower(ch)));
  return out;
}

}  // namespace

bool is_nccl_type(const std::string& name) { return nccl_type_bytes(name) > 0; }

int nccl_type_bytes(const std::string& name) {
  for (const NcclType& t : kNcclTypes)
    if (name == t.name) return t.bytes;
  return 0;
}

Calibration parse_calibration(const std::string& text_in, const std::string& source) {
  const json::value doc = io::parse_json(text_in, source);
  const Place root{source, ""};
  const auto& o = object_at(doc, root);
  only_keys(o, root, {"stepsim_calibration", "provenance", "compute", "collectives"});
  const json::value& version = required(o, root, "stepsim_calibration");
  if (!version.is_number() || version.to_number<double>() != kFormatVersion)
    root.at("stepsim_calibration")
        .fail(fmt::format("expected format version {}, got {}", kFormatVersion, io::describe_value(version)));
  Calibration c;
  c.source = source;
  c.provenance = read_provenance(required(o, root, "provenance"), root.at("provenance"));
  if (const auto* x = o.if_contains("compute")) c.compute = read_compute(*x, root.at("compute"));
  c.collectives = read_list<CollectiveTable>(o, root, "collectives", read_collective);
  return c;
}

std::string measured_file_name(const std::string& path) { return path == "-" ? "<stdin>" : path; }

std::string read_measured_file(const std::string& path, const char* what) {
  constexpr std::size_t kMaxBytes = std::size_t{256} << 20;
  const std::string name = measured_file_name(path);
  std::ifstream file;
  if (path != "-") {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
      throw InputError(path, "", fmt::format("is a folder, not a file: expected the {}", what));
    file.open(path, std::ios::binary);
    if (!file) throw InputError(path, "", fmt::format("cannot open the {}: {}", what, std::strerror(errno)));
    note_input_file(path);
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxBytes) throw InputError(name, "", fmt::format("the {} is larger than 256 MiB", what));
  }
  if (in.bad()) throw InputError(name, "", fmt::format("cannot read the {}", what));
  return text;
}

Calibration read_calibration(const std::string& path) {
  const std::string text = read_measured_file(path, "calibration file");
  const std::string name = measured_file_name(path);
  if (text.empty()) throw InputError(name, "", "expected a calibration file (JSON), got an empty file");
  return parse_calibration(text, name);
}

std::string calibration_json(const Calibration& c) {
  json::object prov{{"gpu", c.provenance.gpu}};
  if (c.provenance.gpu_count > 0) prov["gpu_count"] = c.provenance.gpu_count;
  for (auto [key, value] : {std::pair{"driver", &c.provenance.driver},
                            {"cuda", &c.provenance.cuda},
                            {"nccl", &c.provenance.nccl},
                            {"host", &c.provenance.host},
                            {"date", &c.provenance.date},
                            {"command", &c.provenance.command}}) {
    if (!value->empty()) prov[key] = *value;
  }
  json::array sources;
  for (const auto& s : c.provenance.sources) sources.emplace_back(s);
  prov["sources"] = std::move(sources);

  json::object compute;
  json::array gemm, attention, memory;
  for (const auto& g : c.compute.gemm)
    gemm.push_back({{"m", g.m}, {"n", g.n}, {"k", g.k}, {"dtype", to_string(g.dtype)}, {"time_us", g.time_us}});
  for (const auto& a : c.compute.attention)
    attention.push_back({{"pass", a.backward ? "backward" : "forward"},
                         {"batch", a.batch},
                         {"heads", a.heads},
                         {"kv_heads", a.kv_heads},
                         {"seq", a.seq},
                         {"head_dim", a.head_dim},
                         {"dtype", to_string(a.dtype)},
                         {"time_us", a.time_us}});
  for (const auto& m : c.compute.memory) memory.push_back({{"bytes", m.bytes}, {"gbytes_per_s", m.gbytes_per_s}});
  if (!gemm.empty()) compute["gemm"] = std::move(gemm);
  if (!attention.empty()) compute["attention"] = std::move(attention);
  if (!memory.empty()) compute["memory"] = std::move(memory);
  if (c.compute.launch_overhead_us) compute["launch_overhead_us"] = *c.compute.launch_overhead_us;
  if (c.compute.dispatch_us) compute["dispatch_us"] = *c.compute.dispatch_us;
  if (c.compute.comm_slowdown) compute["comm_slowdown"] = *c.compute.comm_slowdown;
  json::object eff;
  const FittedEfficiency& e = c.compute.efficiency;
  for (auto [key, value] : {std::pair{"gemm_max", &e.gemm_max},
                            {"fp8_gemm_max", &e.fp8_gemm_max},
                            {"gemm_half_flops", &e.gemm_half_flops},
                            {"gemm_half_k", &e.gemm_half_k},
                            {"attention_max", &e.attention_max},
                            {"hbm", &e.hbm},
                            {"comm_slowdown", &e.comm_slowdown}})
    if (*value) eff[key] = **value;
  if (!eff.empty()) compute["efficiency"] = std::move(eff);

  json::array collectives;
  for (const auto& t : c.collectives) {
    json::object o{{"op", to_string(t.op)},
                   {"ranks", t.ranks},
                   {"nodes", t.nodes},
                   {"ranks_per_node", t.ranks_per_node},
                   {"dtype", t.dtype}};
    if (!t.algorithm.empty()) o["algorithm"] = t.algorithm;
    if (!t.protocol.empty()) o["protocol"] = t.protocol;
    o["fit"] = fit_json(t.fit);
    json::array points;
    for (const auto& pt : t.points) points.push_back({{"bytes", pt.bytes}, {"time_us", pt.time_us}});
    o["points"] = std::move(points);
    collectives.push_back(std::move(o));
  }
  json::object doc{{"stepsim_calibration", kFormatVersion}, {"provenance", std::move(prov)}};
  if (!compute.empty()) doc["compute"] = std::move(compute);
  doc["collectives"] = std::move(collectives);
  return io::pretty_json(doc) + "\n";
}

bool gpu_matches(const std::string& measured_gpu, const std::string& preset) {
  if (measured_gpu.empty() || preset.empty()) return true;
  const Sku m = sku_of(measured_gpu), p = sku_of(preset);
  if (m.family.empty() || p.family.empty()) {
    // A name of no known family pattern: its first word must appear in the other.
    const std::string family = lower_alnum(preset.substr(0, preset.find('-')));
    return lower_alnum(measured_gpu).find(family) != std::string::npos;
  }
  return m.family == p.family && agree(m.form, p.form) && agree(m.memory, p.memory);
}

namespace {

// A value out of `r`, as the note that leaves it out says it.
std::string out_of_range(const std::string& key, double x, const ValueRange& r) {
  return fmt::format("{} {} left out: a calibration file holds {} from {} to {}", key, x, r.unit, r.lo, r.hi);
}

// Drops the points of `points` whose `value` is out of `r`, with a note for each.
template <class Point, class Value>
void drop_points(std::vector<Point>& points, const std::string& key, Value value, const ValueRange& r,
                 std::vector<std::string>& notes) {
  std::vector<Point> kept;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double x = value(points[i]);
    if (r.holds(x)) {
      kept.push_back(points[i]);
    } else {
      notes.push_back(out_of_range(fmt::format("{}/{}", key, i), x, r));
    }
  }
  points = std::move(kept);
}

}  // namespace

std::vector<std::string> leave_out_unreadable(Calibration& c) {
  std::vector<std::string> notes;
  ComputeTables& t = c.compute;
  for (auto [key, value, range] : {std::tuple{"compute.launch_overhead_us", &t.launch_overhead_us, kHostCostUs},
                                   {"compute.dispatch_us", &t.dispatch_us, kHostCostUs},
                                   {"compute.comm_slowdown", &t.comm_slowdown, kSlowdown}}) {
    if (*value && !range.holds(**value)) {
      notes.push_back(out_of_range(key, **value, range));
      value->reset();
    }
  }
  for (const EfficiencyField& f : kEfficiencyFields) {
    std::optional<double>& v = t.efficiency.*f.fitted;
    if (v && !(*v >= f.lo && *v <= f.hi)) {
      notes.push_back(out_of_range(fmt::format("compute.efficiency.{}", f.key), *v, {f.lo, f.hi, f.unit}));
      v.reset();
    }
  }
  drop_points(
      t.gemm, "compute.gemm", [](const GemmPoint& g) { return g.time_us; }, kKernelTimeUs, notes);
  drop_points(
      t.attention, "compute.attention", [](const AttentionPoint& a) { return a.time_us; }, kKernelTimeUs, notes);
  drop_points(
      t.memory, "compute.memory", [](const BandwidthPoint& m) { return m.bytes; }, kMemoryBytes, notes);
  drop_points(
      t.memory, "compute.memory", [](const BandwidthPoint& m) { return m.gbytes_per_s; }, kMemoryGbps, notes);
  std::vector<CollectiveTable> kept;
  for (std::size_t i = 0; i < c.collectives.size(); ++i) {
    CollectiveTable& table = c.collectives[i];
    const std::size_t before = table.points.size();
    const std::string key = fmt::format("collectives/{} ({} of {} ranks) point", i, to_string(table.op), table.ranks);
    drop_points(
        table.points, key, [](const CollectivePoint& p) { return p.time_us; }, kKernelTimeUs, notes);
    drop_points(
        table.points, key, [](const CollectivePoint& p) { return p.bytes == std::floor(p.bytes) ? p.bytes : -1.0; },
        kCollectiveBytes, notes);
    if (table.points.empty()) {
      notes.push_back(fmt::format("collectives/{} ({} of {} ranks) left out: none of its points is left", i,
                                  to_string(table.op), table.ranks));
      continue;
    }
    if (table.points.size() != before) table.fit = fit_alpha_beta(table.points, table.op, table.ranks, 0.0);
    kept.push_back(std::move(table));
  }
  c.collectives = std::move(kept);
  return notes;
}

bool gpu_stands_for(const std::string& measured_gpu, const std::string& preset) {
  if (!gpu_matches(measured_gpu, preset)) return false;
  const std::string form = sku_of(measured_gpu).form;
  return preset.empty() || !((form == "pcie" || form == "nvl") && sku_of(preset).form.empty());
}

void check_gpu(const Calibration& c, const std::string& preset) {
  if (gpu_stands_for(c.provenance.gpu, preset)) return;
  const std::string form = sku_of(c.provenance.gpu).form;
  const bool board = gpu_matches(c.provenance.gpu, preset);
  throw InputError(c.source, "/provenance/gpu",
                   fmt::format("measured on '{}', but the scenario's GPU is '{}'{} (calibrate on that GPU, or choose a "
                               "cluster with the measured GPU)",
                               c.provenance.gpu, preset,
                               board ? fmt::format(", the SXM board: {} board stands only for a GPU whose name says {}",
                                                   form == "nvl" ? "an NVL" : "a PCIe", form)
                                     : ""));
}

}  // namespace stepsim::calibration
