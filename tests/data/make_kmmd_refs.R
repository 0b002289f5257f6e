# Reference values for tests/test_kernel_tests.py from kernlab's kmmd.
# Run from the repository root:  Rscript tests/data/make_kmmd_refs.R [OUT]
# It writes tests/data/kmmd_refs.json (or OUT): the data of each case and
# kmmd's mmdstats (the biased MMD, sqrt(MMD_b^2), and kernlab's paired
# U-statistic), its H0 decisions and the bootstrap (asymptotic) bound, by
# hand-written JSON so that only base R and kernlab are needed.
suppressMessages(library(kernlab))

args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[1] else "tests/data/kmmd_refs.json"

# sc, num, mat, str, obj: tests/data/json.R, beside this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "json.R"))
lgl <- function(b) if (b) "true" else "false"

kmmd_case <- function(name, seed, m, n, d, shift, kernel, kpar, fastkern) {
  set.seed(seed)
  x <- matrix(rnorm(m * d), m, d)
  y <- matrix(rnorm(n * d), n, d) + shift
  # The bootstrap bound draws from R's generator: seeded, but not reproducible
  # in Python; the tests compare it loosely with a permutation quantile.
  set.seed(seed + 1)
  res <- suppressMessages(kmmd(x, y, kernel = kernel, kpar = kpar, alpha = 0.05,
                               asymptotic = TRUE, ntimes = 300))
  obj(list(name = str(name), X = mat(x), Y = mat(y), fastkern = fastkern,
           mmdstats = num(mmdstats(res)), H0 = lgl(H0(res)), AsympH0 = lgl(AsympH0(res)),
           Radbound = sc(Radbound(res)), Asymbound = sc(Asymbound(res))))
}

cases <- c(
  kmmd_case("rbf_null", 1, 60, 60, 3, 0, "rbfdot", list(sigma = 0.3),
            '{"kernel": "rbf", "gamma": 0.3}'),
  kmmd_case("rbf_shift", 2, 50, 50, 2, 0.8, "rbfdot", list(sigma = 0.5),
            '{"kernel": "rbf", "gamma": 0.5}'),
  kmmd_case("rbf_unequal", 3, 40, 70, 2, 0.5, "rbfdot", list(sigma = 0.25),
            '{"kernel": "rbf", "gamma": 0.25}'),
  kmmd_case("linear_shift", 4, 45, 45, 3, 0.6, "vanilladot", list(),
            '{"kernel": "linear"}'),
  kmmd_case("poly_null", 5, 55, 55, 2, 0, "polydot", list(degree = 2, scale = 0.5, offset = 1),
            '{"kernel": "poly", "gamma": 0.5, "degree": 2, "coef0": 1}')
)
writeLines(paste0("{\"kernlab_version\": ", str(as.character(packageVersion("kernlab"))),
                  ",\n  \"cases\": [\n  ", paste(cases, collapse = ",\n  "), "]}"), out)
