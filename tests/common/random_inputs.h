// Seeded random inputs that look like real training data: logits drawn per row (sometimes with one dominant
// class), log_softmax taken in double and only then rounded to the tensor's dtype.
#ifndef OPENACLNN_TESTS_COMMON_RANDOM_INPUTS_H_
#define OPENACLNN_TESTS_COMMON_RANDOM_INPUTS_H_

#include <cstdint>
#include <random>
#include <vector>

namespace openaclnn::test {

class Rng {
public:
    explicit Rng(uint64_t seed) : engine_(seed) {}
    double Uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine_); }
    double Normal(double mean, double stddev) { return std::normal_distribution<double>(mean, stddev)(engine_); }
    int64_t Int(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(engine_); }  // [lo, hi]
    bool Chance(double p) { return Uniform(0.0, 1.0) < p; }
    template <typename T>
    const T &Pick(const std::vector<T> &v) {
        return v[static_cast<size_t>(Int(0, static_cast<int64_t>(v.size()) - 1))];
    }
    std::mt19937_64 &engine() { return engine_; }

private:
    std::mt19937_64 engine_;
};

// n * c logits: each row has its own spread (0.1 .. 8) and, one time in four, a dominant class (+10 .. +30).
inline std::vector<double> RandomLogits(Rng &rng, int64_t n, int64_t c) {
    std::vector<double> x(static_cast<size_t>(n * c));
    for (int64_t i = 0; i < n; ++i) {
        const double spread = rng.Pick(std::vector<double>{0.1, 1.0, 3.0, 8.0});
        const double shift = rng.Uniform(-20.0, 20.0);  // logits are not centred; lse carries it
        for (int64_t j = 0; j < c; ++j) x[static_cast<size_t>(i * c + j)] = shift + rng.Normal(0.0, spread);
        if (c > 0 && rng.Chance(0.25)) x[static_cast<size_t>(i * c + rng.Int(0, c - 1))] += rng.Uniform(10.0, 30.0);
    }
    return x;
}

}  // namespace openaclnn::test

#endif  // OPENACLNN_TESTS_COMMON_RANDOM_INPUTS_H_
