// stepsim-calibrate: measures the GPUs of one node and writes a stepsim calibration file.
// cuBLASLt GEMMs (BF16, and FP8 where the GPU has it), device-to-device copy bandwidth,
// the host's cost of dispatching a GEMM through cuBLASLt, NCCL collectives over the local
// GPUs with one thread and communicator per GPU (as `mpirun -np N ... -g 1` runs nccl-tests)
// for several sizes and group sizes, and the slowdown of a GEMM while a collective (or, on
// one GPU, a copy) runs beside it. Inputs are random, not zeroed (zeros hold higher clocks). Every CUDA, cuBLAS and
// NCCL call is checked; each figure is the median of timed repetitions after warm-up; progress goes to stderr.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "calibrate_core.hpp"

namespace {

using stepsim::CollOp;
using stepsim::Precision;
using namespace stepsim::calibrate_tool;

// ---- checked calls ----

std::string where(const char* file, int line) { return std::string(file) + ":" + std::to_string(line); }

#define CUDA_CHECK(call)                                                                              \
  do {                                                                                                \
    const cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess)                                                                            \
      throw std::runtime_error(where(__FILE__, __LINE__) + ": " #call ": " + cudaGetErrorString(e_)); \
  } while (false)

#define CUBLAS_CHECK(call)                                                                                      \
  do {                                                                                                          \
    const cublasStatus_t s_ = (call);                                                                           \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                                            \
      throw std::runtime_error(where(__FILE__, __LINE__) + ": " #call ": cuBLAS status " + std::to_string(s_)); \
  } while (false)

#define NCCL_CHECK(call)                                                                              \
  do {                                                                                                \
    const ncclResult_t r_ = (call);                                                                   \
    if (r_ != ncclSuccess)                                                                            \
      throw std::runtime_error(where(__FILE__, __LINE__) + ": " #call ": " + ncclGetErrorString(r_)); \
  } while (false)

void progress(const std::string& line) { std::fprintf(stderr, "stepsim-calibrate: %s\n", line.c_str()); }

struct Options {
  std::string output;
  int gpus = 0;  // 0: all
  int warmup = 3, repeats = 10;
  double max_bytes = 4294967296.0;
  std::size_t gemm_shapes = 48;
  std::vector<GemmRequest> gemms;  // --gemm: exactly these, in place of the plan
  std::string command;
  RunSettings forced;  // what NCCL_ALGO and NCCL_PROTO force on the collectives timed
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + ": expected a value");
      return argv[++i];
    };
    if (a == "-o" || a == "--output")
      o.output = value();
    else if (a == "--gpus")
      o.gpus = std::stoi(value());
    else if (a == "--quick")
      o.warmup = 1, o.repeats = 3, o.gemm_shapes = 12, o.max_bytes = 268435456.0;
    else if (a == "--max-bytes")
      o.max_bytes = std::stod(value());
    else if (a == "--gemm")
      o.gemms.push_back(parse_gemm(value()));
    else if (a == "-h" || a == "--help") {
      std::puts(
          "usage: stepsim-calibrate -o FILE [--gpus N] [--quick] [--max-bytes B] [--gemm MxNxK[:dtype]]...\n"
          "Measures this node's GPUs (GEMM, copy bandwidth, launch overhead, NCCL collectives,\n"
          "GEMM slowdown beside communication) and writes a stepsim calibration file. --gemm\n"
          "(repeatable, e.g. 8192x14336x4096:fp8, as 'stepsim calibrate plan' prints them) measures\n"
          "those GEMM shapes in place of the built-in plan.");
      std::exit(0);
    } else
      throw std::invalid_argument("unknown option '" + a + "' (see --help)");
  }
  if (o.output.empty()) throw std::invalid_argument("-o: give the calibration file to write");
  o.forced = nccl_forced(std::getenv("NCCL_ALGO"), std::getenv("NCCL_PROTO"));
  return o;
}

// ---- timing ----

class Events {
 public:
  Events() {
    CUDA_CHECK(cudaEventCreate(&start_));
    CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~Events() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  void start(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(start_, s)); }
  void stop(cudaStream_t s) { CUDA_CHECK(cudaEventRecord(stop_, s)); }
  double us() {
    CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e3 * static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

// Warm-up runs, then `repeats` timed runs of `body` on `stream`.
template <class Body>
Summary time_on(cudaStream_t stream, const Options& o, const std::string& what, Body body) {
  for (int i = 0; i < o.warmup; ++i) body();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> samples;
  Events ev;
  for (int i = 0; i < o.repeats; ++i) {
    ev.start(stream);
    body();
    ev.stop(stream);
    samples.push_back(ev.us());
  }
  return summarize(samples, what);
}

// Warm-up runs, then `repeats` timed runs of `body` on `stream`, each beside `background`,
// started before the timed window (run_beside): its host time is not the body's.
template <class Background, class Body>
Summary time_beside(cudaStream_t stream, const Options& o, const std::string& what, Background background, Body body) {
  for (int i = 0; i < o.warmup; ++i) {
    background();
    body();
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> samples;
  Events ev;
  for (int i = 0; i < o.repeats; ++i) {
    run_beside([&] { ev.start(stream); }, [&] { ev.stop(stream); }, background, body);
    samples.push_back(ev.us());
  }
  return summarize(samples, what);
}

// ---- GEMM (cuBLASLt, TN as FP8 requires) ----

class Gemm {
 public:
  Gemm(cublasLtHandle_t h, const GemmShape& s, Precision p, void* a, void* b, void* d, void* ws, std::size_t ws_bytes)
      : h_(h), a_(a), b_(b), d_(d), ws_(ws), ws_bytes_(ws_bytes) {
    const cudaDataType_t in = p == Precision::fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, in, static_cast<uint64_t>(s.k), static_cast<uint64_t>(s.m), s.k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, in, static_cast<uint64_t>(s.k), static_cast<uint64_t>(s.n), s.k));
    CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&ld_, CUDA_R_16BF, static_cast<uint64_t>(s.m), static_cast<uint64_t>(s.n), s.m));
    cublasLtMatmulPreference_t pref{};
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes_,
                                                      sizeof(ws_bytes_)));
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h_, desc_, la_, lb_, ld_, ld_, pref, 1, &algo_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found == 0) throw std::runtime_error("cuBLASLt has no algorithm for this GEMM");
  }
  ~Gemm() {
    cublasLtMatrixLayoutDestroy(la_);
    cublasLtMatrixLayoutDestroy(lb_);
    cublasLtMatrixLayoutDestroy(ld_);
    cublasLtMatmulDescDestroy(desc_);
  }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  void run(cudaStream_t s) {
    const float alpha = 1, beta = 0;
    CUBLAS_CHECK(
        cublasLtMatmul(h_, desc_, &alpha, a_, la_, b_, lb_, &beta, d_, ld_, d_, ld_, &algo_.algo, ws_, ws_bytes_, s));
  }

 private:
  cublasLtHandle_t h_;
  void *a_, *b_, *d_, *ws_;
  std::size_t ws_bytes_;
  cublasLtMatmulDesc_t desc_{};
  cublasLtMatrixLayout_t la_{}, lb_{}, ld_{};
  cublasLtMatmulHeuristicResult_t algo_{};
};

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(std::size_t bytes) { CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

constexpr std::size_t kWorkspace = std::size_t{64} << 20;

// Random bytes over `bytes` of device memory: a 64 MiB random block copied over it.
void fill_random(void* device, std::size_t bytes, unsigned seed) {
  const std::vector<unsigned char> block = random_inputs(std::min(bytes, std::size_t{64} << 20), seed);
  for (std::size_t at = 0; at < bytes; at += block.size()) {
    const std::size_t n = std::min(block.size(), bytes - at);
    CUDA_CHECK(cudaMemcpy(static_cast<unsigned char*>(device) + at, block.data(), n, cudaMemcpyHostToDevice));
  }
}

// The host's time per call of `dispatch`, over a thousand calls, median of the repeats.
template <class Dispatch>
Summary host_cost(const Options& o, cudaStream_t s, Dispatch dispatch, const std::string& what) {
  std::vector<double> per_call;
  for (int r = 0; r < o.repeats; ++r) {
    constexpr int kCalls = 1000;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) dispatch();
    const auto t1 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaStreamSynchronize(s));
    per_call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / kCalls);
  }
  return summarize(per_call, what);
}

// The GEMMs to time: --gemm's, or the plan's in BF16 and, from Ada on, FP8.
std::vector<GemmRequest> gemm_requests(const Options& o, const cudaDeviceProp& prop) {
  if (!o.gemms.empty()) return o.gemms;
  std::vector<GemmRequest> out;
  const bool fp8 = prop.major * 10 + prop.minor >= 89;
  for (Precision p : {Precision::bf16, Precision::fp8})
    for (const GemmShape& g : gemm_plan(o.gemm_shapes))
      if (p != Precision::fp8 || fp8) out.push_back({g, p});
  return out;
}

void measure_gemms(const Options& o, const cudaDeviceProp& prop, Recorder& rec) {
  const std::vector<GemmRequest> requests = gemm_requests(o, prop);
  std::vector<GemmShape> plan;
  for (const GemmRequest& r : requests) plan.push_back(r.shape);
  std::size_t most = 64 * 64;  // the dispatch measurement's GEMM at least
  for (const auto& s : plan)
    most = std::max({most, static_cast<std::size_t>(s.k * s.m), static_cast<std::size_t>(s.k * s.n),
                     static_cast<std::size_t>(s.m * s.n)});
  DeviceBuffer a(most * 2), b(most * 2), d(most * 2), ws(kWorkspace);
  fill_random(a.p, most * 2, 1);
  fill_random(b.p, most * 2, 2);
  cublasLtHandle_t h{};
  CUBLAS_CHECK(cublasLtCreate(&h));
  cudaStream_t s{};
  CUDA_CHECK(cudaStreamCreate(&s));
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const GemmShape& g = requests[i].shape;
    const Precision p = requests[i].dtype;
    Gemm gemm(h, g, p, a.p, b.p, d.p, ws.p, kWorkspace);
    const Summary t = time_on(s, o, "GEMM", [&] { gemm.run(s); });
    rec.gemm(g, p, t);
    progress("GEMM " + std::string(stepsim::to_string(p)) + " " + std::to_string(i + 1) + "/" +
             std::to_string(requests.size()) + ": " + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" +
             std::to_string(g.k) + " " + std::to_string(t.median) + " us (" +
             std::to_string(g.flops() / t.median * 1e-6) + " TFLOPS)");
  }
  // The host's cost of one GEMM as a framework dispatches it (cublasLtMatmul on a small
  // shape, the library's host path and the driver's enqueue together): stepsim's per-kernel
  // launch overhead. PyTorch's own dispatcher adds its part on top; this is the floor.
  Gemm small(h, GemmShape{64, 64, 64}, Precision::bf16, a.p, b.p, d.p, ws.p, kWorkspace);
  const Summary dispatch = host_cost(
      o, s, [&] { small.run(s); }, "GEMM dispatch");
  rec.launch_overhead(dispatch);
  progress("GEMM dispatch " + std::to_string(dispatch.median) + " us on the host per kernel");
  CUDA_CHECK(cudaStreamDestroy(s));
  CUBLAS_CHECK(cublasLtDestroy(h));
}

void measure_copies(const Options& o, Recorder& rec) {
  cudaStream_t s{};
  CUDA_CHECK(cudaStreamCreate(&s));
  const double top = std::min(o.max_bytes, 1073741824.0);
  DeviceBuffer src(static_cast<std::size_t>(top)), dst(static_cast<std::size_t>(top));
  for (double bytes : size_plan(1048576.0, top, 4)) {
    const auto n = static_cast<std::size_t>(bytes);
    const Summary t =
        time_on(s, o, "copy", [&] { CUDA_CHECK(cudaMemcpyAsync(dst.p, src.p, n, cudaMemcpyDeviceToDevice, s)); });
    rec.copy(2 * bytes, t);  // read and written
    progress("copy " + std::to_string(n) + " B: " + std::to_string(2 * bytes / (t.median * 1e3)) + " GB/s");
  }
  // The driver's enqueue cost alone, for the log: a framework pays more per kernel.
  const Summary enqueue = host_cost(
      o, s, [&] { CUDA_CHECK(cudaMemsetAsync(dst.p, 0, 4, s)); }, "driver enqueue");
  progress("driver enqueue " + std::to_string(enqueue.median) + " us per operation (not recorded)");
  CUDA_CHECK(cudaStreamDestroy(s));
}

// ---- NCCL ----

// One communicator and one host thread per GPU, as `mpirun -np N all_reduce_perf -g 1` runs
// nccl-tests: each rank enqueues its own collectives, so N launches are not serialised on one
// thread (the 8-GPU logs of one thread driving all GPUs, -g 8, floor at about 36-40 us).
class Comm {
 public:
  Comm(int n, std::size_t max_bytes) : comms_(n), streams_(n), send_(n), recv_(n) {
    ncclUniqueId id{};
    NCCL_CHECK(ncclGetUniqueId(&id));
    on_each_rank([&](int i) {
      CUDA_CHECK(cudaStreamCreate(&streams_[i]));
      CUDA_CHECK(cudaMalloc(&send_[i], max_bytes));
      CUDA_CHECK(cudaMalloc(&recv_[i], max_bytes));
      fill_random(send_[i], max_bytes, 100 + static_cast<unsigned>(i));
      NCCL_CHECK(ncclCommInitRank(&comms_[i], size(), id, i));  // every rank at once
    });
  }
  ~Comm() {
    for (std::size_t i = 0; i < comms_.size(); ++i) {
      cudaSetDevice(static_cast<int>(i));
      cudaFree(send_[i]);
      cudaFree(recv_[i]);
      cudaStreamDestroy(streams_[i]);
      ncclCommDestroy(comms_[i]);
    }
    cudaSetDevice(0);
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }
  cudaStream_t stream(int i) const { return streams_[static_cast<std::size_t>(i)]; }

  // One collective of nccl-tests size S enqueued by every rank's own thread (float elements).
  void launch(CollOp op, std::size_t s) {
    on_each_rank([&](int i) { enqueue(i, op, s); });
  }

  // The time of one collective as nccl-tests takes it (common.cu, BenchTime): every rank
  // starts together, enqueues kIterations collectives back to back and waits for them; the
  // time is the span over their number, averaged over the ranks (its default `-a 1`). Each
  // repetition is one such sample; the median of them is kept. A collective timed alone would
  // carry its launch and the ranks' start skew whole, which back-to-back runs spread: at small
  // sizes it reads several microseconds above what nccl-tests prints, and the import of a
  // nccl-tests log and this program would calibrate the same collective differently.
  static constexpr int kIterations = 20;  // nccl-tests' default -n
  Summary time(CollOp op, std::size_t s, const Options& o) {
    const auto n = static_cast<std::size_t>(size());
    std::vector<std::vector<double>> us(n, std::vector<double>(static_cast<std::size_t>(o.repeats)));
    std::barrier together(size());
    on_each_rank([&](int i) {
      for (int w = 0; w < o.warmup; ++w) enqueue(i, op, s);
      CUDA_CHECK(cudaStreamSynchronize(streams_[i]));
      Events ev;
      for (int r = 0; r < o.repeats; ++r) {
        together.arrive_and_wait();
        ev.start(streams_[i]);
        for (int k = 0; k < kIterations; ++k) enqueue(i, op, s);
        ev.stop(streams_[i]);
        us[static_cast<std::size_t>(i)][static_cast<std::size_t>(r)] = ev.us() / kIterations;
      }
    });
    std::vector<double> samples;
    for (int r = 0; r < o.repeats; ++r) {
      double sum = 0;
      for (const auto& rank : us) sum += rank[static_cast<std::size_t>(r)];
      samples.push_back(sum / static_cast<double>(n));
    }
    return summarize(samples, "collective");
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<void*> send_, recv_;

  // `body(i)` on a thread of its own for each rank i, on that rank's device; the first error
  // of any thread is thrown here once all have ended.
  template <class Body>
  void on_each_rank(Body body) {
    std::vector<std::string> errors(comms_.size());
    std::vector<std::thread> threads;
    for (int i = 0; i < size(); ++i)
      threads.emplace_back([&, i] {
        try {
          CUDA_CHECK(cudaSetDevice(i));
          body(i);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(i)] = e.what();
        }
      });
    for (std::thread& t : threads) t.join();
    CUDA_CHECK(cudaSetDevice(0));
    for (const std::string& e : errors)
      if (!e.empty()) throw std::runtime_error(e);
  }

  void enqueue(int i, CollOp op, std::size_t s) {
    const std::size_t count = s / 4;
    const auto n = static_cast<std::size_t>(size());
    switch (op) {
      case CollOp::allreduce:
        NCCL_CHECK(ncclAllReduce(send_[i], recv_[i], count, ncclFloat, ncclSum, comms_[i], streams_[i]));
        break;
      case CollOp::allgather:
        NCCL_CHECK(ncclAllGather(send_[i], recv_[i], count / n, ncclFloat, comms_[i], streams_[i]));
        break;
      default:
        NCCL_CHECK(ncclReduceScatter(send_[i], recv_[i], count / n, ncclFloat, ncclSum, comms_[i], streams_[i]));
        break;
    }
  }
};

void measure_collectives(const Options& o, int gpus, Recorder& rec) {
  for (int n : group_sizes(gpus)) {
    Comm comm(n, static_cast<std::size_t>(o.max_bytes));
    for (CollOp op : {CollOp::allreduce, CollOp::allgather, CollOp::reducescatter}) {
      for (double bytes : size_plan(std::max(8.0, 4.0 * n), o.max_bytes, 4)) {
        const auto s = static_cast<std::size_t>(bytes) / (4 * n) * (4 * n);  // whole elements per rank
        if (s == 0) continue;
        const Summary t = comm.time(op, s, o);
        rec.collective(op, n, static_cast<double>(s), t);
        progress(std::string(stepsim::to_string(op)) + " on " + std::to_string(n) + " GPUs, " + std::to_string(s) +
                 " B: " + std::to_string(t.median) + " us");
      }
    }
  }
}

// A large GEMM alone, then beside a collective over all GPUs (or a copy on one GPU).
void measure_slowdown(const Options& o, int gpus, Recorder& rec) {
  const GemmShape g{8192, 8192, 8192};
  const std::size_t elems = static_cast<std::size_t>(g.m * g.k);
  DeviceBuffer a(elems * 2), b(elems * 2), d(elems * 2), ws(kWorkspace);
  cublasLtHandle_t h{};
  CUBLAS_CHECK(cublasLtCreate(&h));
  cudaStream_t s{};
  CUDA_CHECK(cudaStreamCreate(&s));
  Gemm gemm(h, g, Precision::bf16, a.p, b.p, d.p, ws.p, kWorkspace);
  const Summary alone = time_on(s, o, "GEMM alone", [&] { gemm.run(s); });
  const std::size_t busy = std::size_t{1} << 30;
  Summary beside;
  if (gpus >= 2) {
    Comm comm(gpus, busy);
    beside = time_beside(
        s, o, "GEMM beside a collective", [&] { comm.launch(CollOp::allreduce, busy); }, [&] { gemm.run(s); });
    for (int i = 0; i < gpus; ++i) {
      CUDA_CHECK(cudaSetDevice(i));
      CUDA_CHECK(cudaStreamSynchronize(comm.stream(i)));
    }
    CUDA_CHECK(cudaSetDevice(0));
  } else {
    cudaStream_t copy{};
    CUDA_CHECK(cudaStreamCreate(&copy));
    DeviceBuffer x(busy), y(busy);
    beside = time_beside(
        s, o, "GEMM beside a copy",
        [&] { CUDA_CHECK(cudaMemcpyAsync(y.p, x.p, busy, cudaMemcpyDeviceToDevice, copy)); }, [&] { gemm.run(s); });
    CUDA_CHECK(cudaStreamSynchronize(copy));
    CUDA_CHECK(cudaStreamDestroy(copy));
  }
  rec.slowdown(alone, beside);
  progress("GEMM 8192^3 alone " + std::to_string(alone.median) + " us, beside communication " +
           std::to_string(beside.median) + " us");
  CUDA_CHECK(cudaStreamDestroy(s));
  CUBLAS_CHECK(cublasLtDestroy(h));
}

stepsim::calibration::Provenance provenance(const Options& o, const cudaDeviceProp& prop, int gpus) {
  stepsim::calibration::Provenance p;
  p.gpu = prop.name;
  p.gpu_count = gpus;
  int driver = 0, runtime = 0, nccl = 0;
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  NCCL_CHECK(ncclGetVersion(&nccl));
  p.driver = "CUDA driver API " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10);
  p.cuda = std::to_string(runtime / 1000) + "." + std::to_string(runtime % 1000 / 10);
  p.nccl = std::to_string(nccl / 10000) + "." + std::to_string(nccl / 100 % 100) + "." + std::to_string(nccl % 100);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) p.host = host;
  char date[64] = {};
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  p.date = date;
  p.command = o.command;
  return p;
}

int run(const Options& o) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (count < 1) throw std::runtime_error("no CUDA device");
  const int gpus = o.gpus > 0 ? std::min(o.gpus, count) : count;
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  CUDA_CHECK(cudaSetDevice(0));
  progress(std::to_string(gpus) + " x " + prop.name);
  Recorder rec(provenance(o, prop, gpus), o.forced);
  measure_gemms(o, prop, rec);
  measure_copies(o, rec);
  if (gpus >= 2) measure_collectives(o, gpus, rec);
  measure_slowdown(o, gpus, rec);
  std::vector<std::string> left_out;
  const std::string text = rec.json(&left_out);
  for (const std::string& note : left_out) progress("not written: " + note);
  const std::string tmp = o.output + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), o.output.c_str()) != 0) throw std::runtime_error("cannot write " + o.output);
  progress("wrote " + o.output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepsim-calibrate: error: %s\n", e.what());
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stepsim-calibrate: error: %s\n", e.what());
    return 1;
  }
}
