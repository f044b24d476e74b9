/*
 * cpu_norm_kernels.h — the body of cpu_norm.c's BatchNorm kernels, included
 * once per element type of the activations (x, y, dy, dx): float, and
 * bf16 for a bf16 network's BatchNorm that runs on its bf16 tensors
 * itself. The includer defines BN_T (the stored type), BN_LD (stored to
 * float, exact), BN_ST (float to stored: identity, or round to nearest
 * even) and BN_FN (the name suffix). The arithmetic is the float kernel's,
 * value for value: each bf16 element is widened as it is read and rounded
 * as it is written, so the bf16 kernels give the bits the float kernels
 * give on widened copies rounded afterwards (the executor's float-copies
 * path).
 */
/* Sum and sum of squares of len floats, in double, lane j % 8 then lanes in
 * order: a fixed order that the compiler can still vectorise. */
static void BN_FN(bn_sums)(const BN_T *x, size_t len, double lane_s[BN_LANES],
                           double lane_q[BN_LANES])
{
    size_t j = 0;
    for (; j + BN_LANES <= len; j += BN_LANES) {
        for (int u = 0; u < BN_LANES; u++) {
            double v = BN_LD(x[j + u]);
            lane_s[u] += v;
            lane_q[u] += v * v;
        }
    }
    for (int u = 0; j < len; j++, u++) {
        double v = BN_LD(x[j]);
        lane_s[u] += v;
        lane_q[u] += v * v;
    }
}

/* A channel's constants: its statistics, gamma and beta, and whether a
 * ReLU is joined after it (batchnorm_relu_*). */
typedef struct BN_FN(bn_chan) {
    float mean, invstd, gamma, beta;
    int relu;
} BN_FN(bn_chan);

/* The gradient at BatchNorm's output of the value at x: dy, or with relu
 * dy at the joined ReLU's output through its rule (sl_bn_relu_dy). The
 * loops below pass relu as a constant, so each has a loop per case and
 * the plain one computes nothing of the ReLU's. */
static inline __attribute__((always_inline)) float
BN_FN(bn_dy)(const BN_FN(bn_chan) * k, int relu, BN_T dy, BN_T x)
{
    float d = BN_LD(dy);
    return relu ? sl_bn_relu_dy(d, BN_LD(x), k->mean, k->invstd, k->gamma, k->beta) : d;
}

/* sum(dy) and sum(dy * (x - mean)) of len values, in double (dy by
 * bn_dy). */
static inline __attribute__((always_inline)) void
BN_FN(bn_grad_sums_of)(const BN_T *x, const BN_T *dy, size_t len, const BN_FN(bn_chan) * k,
                       int relu, double lane_s[BN_LANES], double lane_p[BN_LANES])
{
    double mean = (double)k->mean;
    size_t j = 0;
    for (; j + BN_LANES <= len; j += BN_LANES) {
        for (int u = 0; u < BN_LANES; u++) {
            float d = BN_FN(bn_dy)(k, relu, dy[j + u], x[j + u]);
            lane_s[u] += (double)d;
            lane_p[u] += sl_bn_dy_xc(d, BN_LD(x[j + u]), mean);
        }
    }
    for (int u = 0; j < len; j++, u++) {
        float d = BN_FN(bn_dy)(k, relu, dy[j], x[j]);
        lane_s[u] += (double)d;
        lane_p[u] += sl_bn_dy_xc(d, BN_LD(x[j]), mean);
    }
}

static void BN_FN(bn_grad_sums)(const BN_T *x, const BN_T *dy, size_t len,
                                const BN_FN(bn_chan) * k, double lane_s[BN_LANES],
                                double lane_p[BN_LANES])
{
    if (k->relu)
        BN_FN(bn_grad_sums_of)(x, dy, len, k, 1, lane_s, lane_p);
    else
        BN_FN(bn_grad_sums_of)(x, dy, len, k, 0, lane_s, lane_p);
}

/* One plane's input gradient (dp (+)= sl_bn_dx), dy by bn_dy. */
static inline __attribute__((always_inline)) void
BN_FN(bn_dx_plane_of)(const BN_T *xp, const BN_T *gp, BN_T *dp, int hw, const BN_FN(bn_chan) * k,
                      int relu, int accumulate, float scale, float mean_dy, float mean_dy_xhat)
{
    if (accumulate) {
        for (int j = 0; j < hw; j++)
            dp[j] = BN_ST(BN_LD(dp[j]) + sl_bn_dx(BN_LD(xp[j]), BN_FN(bn_dy)(k, relu, gp[j], xp[j]),
                                                  k->mean, k->invstd, scale, mean_dy,
                                                  mean_dy_xhat));
    } else {
        for (int j = 0; j < hw; j++)
            dp[j] = BN_ST(sl_bn_dx(BN_LD(xp[j]), BN_FN(bn_dy)(k, relu, gp[j], xp[j]), k->mean,
                                   k->invstd, scale, mean_dy, mean_dy_xhat));
    }
}

static void BN_FN(bn_dx_plane)(const BN_T *xp, const BN_T *gp, BN_T *dp, int hw,
                               const BN_FN(bn_chan) * k, int accumulate, float scale,
                               float mean_dy, float mean_dy_xhat)
{
    if (k->relu)
        BN_FN(bn_dx_plane_of)(xp, gp, dp, hw, k, 1, accumulate, scale, mean_dy, mean_dy_xhat);
    else
        BN_FN(bn_dx_plane_of)(xp, gp, dp, hw, k, 0, accumulate, scale, mean_dy, mean_dy_xhat);
}

/* y = sl_bn_normalise(x) over channel ch of every image: train, apply and
 * infer must agree; with relu, y = sl_bn_relu_out(x) (the ReLU joined). */
static void BN_FN(bn_normalise_channel)(int n, int c, size_t hw, int ch, const BN_T *x,
                                        const float *gamma, const float *beta, float mean,
                                        float invstd, BN_T *y, int relu)
{
    float gm = sl_bn_gamma(gamma, ch);
    float bt = sl_bn_beta(beta, ch);
    for (int i = 0; i < n; i++) {
        size_t base = ((size_t)i * c + ch) * hw;
        const BN_T *xp = x + base;
        BN_T *yp = y + base;
        if (relu)
            for (size_t j = 0; j < hw; j++)
                yp[j] = BN_ST(sl_bn_relu_out(BN_LD(xp[j]), mean, invstd, gm, bt));
        else
            for (size_t j = 0; j < hw; j++)
                yp[j] = BN_ST(sl_bn_normalise(BN_LD(xp[j]), mean, invstd, gm, bt));
    }
}

static void BN_FN(bn_forward_train)(const sl_exec *ex, int n, int c, int hw, const BN_T *x,
                                    const float *gamma, const float *beta, BN_T *y,
                                    float *save_mean, float *save_invstd, float *running_mean,
                                    float *running_var, float momentum, float eps, void *ws,
                                    int relu)
{
    (void)ws; /* the sums live on the stack */
    size_t count = (size_t)n * (size_t)hw;
    int par = (double)count * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int ch = 0; ch < c; ch++), {
        double ls[BN_LANES] = {0}, lq[BN_LANES] = {0};
        for (int i = 0; i < n; i++)
            BN_FN(bn_sums)(x + ((size_t)i * c + ch) * hw, (size_t)hw, ls, lq);
        double mean, var;
        sl_bn_batch_moments(bn_lanes_total(ls), bn_lanes_total(lq), (double)count, &mean, &var);
        float m = (float)mean;
        float invstd = sl_bn_batch_invstd(var, eps);
        save_mean[ch] = m;
        save_invstd[ch] = invstd;
        if (running_mean)
            sl_bn_running_update(&running_mean[ch], &running_var[ch], m, var, (double)count,
                                 momentum);
        BN_FN(bn_normalise_channel)(n, c, (size_t)hw, ch, x, gamma, beta, m, invstd, y, relu);
    });
}

static void BN_FN(bn_forward_apply)(const sl_exec *ex, int n, int c, int hw, const BN_T *x,
                                    const float *gamma, const float *beta, const float *mean,
                                    const float *invstd, BN_T *y, int relu)
{
    int par = (double)n * hw * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int ch = 0; ch < c; ch++), {
        BN_FN(bn_normalise_channel)(n, c, (size_t)hw, ch, x, gamma, beta, mean[ch], invstd[ch],
                                    y, relu);
    });
}

static void BN_FN(bn_forward_infer)(const sl_exec *ex, int n, int c, int hw, const BN_T *x,
                                    const float *gamma, const float *beta,
                                    const float *running_mean, const float *running_var, float eps,
                                    BN_T *y, float *save_mean, float *save_invstd)
{
    int par = (double)n * hw * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int ch = 0; ch < c; ch++), {
        float invstd = sl_bn_running_invstd(running_var[ch], eps);
        if (save_mean) {
            save_mean[ch] = running_mean[ch];
            save_invstd[ch] = invstd;
        }
        BN_FN(bn_normalise_channel)(n, c, (size_t)hw, ch, x, gamma, beta, running_mean[ch],
                                    invstd, y, 0);
    });
}

/* With xhat = (x - mean) * invstd and M = n * hw:
 *   dbeta += sum(dy), dgamma += sum(dy * xhat),
 *   dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M),
 * or, frozen (mean and invstd constants), dx = gamma * invstd * dy.
 * The sums come first, so dx may alias dy (each dy read before its dx is
 * written). With relu, dy is the gradient at the joined ReLU's output
 * (bn_dy). */
static void BN_FN(bn_backward)(const sl_exec *ex, int n, int c, int hw, const BN_T *x,
                               const BN_T *dy, const float *gamma, const float *beta,
                               const float *save_mean, const float *save_invstd, BN_T *dx,
                               int accumulate, float *dgamma, float *dbeta, int frozen, void *ws,
                               int relu)
{
    (void)ws; /* the sums live on the stack */
    size_t count = (size_t)n * (size_t)hw;
    int par = (double)count * c >= CPU_PAR_MIN;
    SL_PARALLEL_FOR(cpu_threads(ex), par, (int ch = 0; ch < c; ch++), {
        float mean = save_mean[ch], invstd = save_invstd[ch];
        BN_FN(bn_chan) k = {mean, invstd, sl_bn_gamma(gamma, ch), sl_bn_beta(beta, ch), relu};
        double ls[BN_LANES] = {0}, lp[BN_LANES] = {0};
        for (int i = 0; i < n; i++) {
            size_t base = ((size_t)i * c + ch) * hw;
            BN_FN(bn_grad_sums)(x + base, dy + base, (size_t)hw, &k, ls, lp);
        }
        double sum_dy = bn_lanes_total(ls);
        double sum_dy_xhat = bn_lanes_total(lp) * (double)invstd;
        if (dbeta)
            dbeta[ch] += (float)sum_dy;
        if (dgamma)
            dgamma[ch] += (float)sum_dy_xhat;
        if (!dx)
            continue; /* parameter gradients only */
        float scale = sl_bn_gamma(gamma, ch) * invstd;
        float mean_dy, mean_dy_xhat;
        sl_bn_grad_means(sum_dy, sum_dy_xhat, (double)count, frozen, &mean_dy, &mean_dy_xhat);
        for (int i = 0; i < n; i++) {
            size_t base = ((size_t)i * c + ch) * hw;
            BN_FN(bn_dx_plane)(x + base, dy + base, dx + base, hw, &k, accumulate, scale, mean_dy,
                               mean_dy_xhat);
        }
    });
}
