# Reference values for tests/test_cca.py from kernlab's kcca.
# Run from the repository root:  Rscript tests/data/make_kcca_refs.R
# It writes tests/data/kcca_refs.json (data, kcor, xcoef, ycoef) by
# hand-written JSON, so that only base R and kernlab are needed.
# kcca (kernlab 0.9.32) uses one kernel for both views, does not centre, and
# regularises as (K + gamma I) K + 1e-6 I: KernelCCA(center=False,
# regularization=gamma, jitter=1e-6).
suppressMessages(library(kernlab))

# sc, num, mat, str, obj: tests/data/json.R, beside this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "json.R"))

kcca_case <- function(name, seed, n, kernel, kpar, gamma, ncomps, fastkern) {
  set.seed(seed)
  x <- matrix(rnorm(n * 3), n, 3)
  y <- cbind(sin(x[, 1]) + 0.2 * rnorm(n), x[, 2]^2 + 0.2 * rnorm(n))
  fit <- kcca(x, y, kernel = kernel, kpar = kpar, gamma = gamma, ncomps = ncomps)
  obj(list(name = str(name), X = mat(x), Y = mat(y), kernel = str(kernel),
           regularization = sc(gamma), fastkern = fastkern,
           kcor = num(kcor(fit)), xcoef = mat(xcoef(fit)), ycoef = mat(ycoef(fit))))
}

cases <- c(
  kcca_case("rbf", 1, 50, "rbfdot", list(sigma = 0.5), 0.1, 8,
            obj(list(kernel = str("rbf"), gamma = sc(0.5)))),
  kcca_case("rbf_strong", 2, 41, "rbfdot", list(sigma = 0.2), 2, 6,
            obj(list(kernel = str("rbf"), gamma = sc(0.2)))),
  kcca_case("poly2", 3, 37, "polydot", list(degree = 2, scale = 0.5, offset = 1), 1, 6,
            obj(list(kernel = str("poly"), gamma = sc(0.5), degree = sc(2), coef0 = sc(1)))),
  kcca_case("linear", 4, 30, "vanilladot", list(), 0.5, 4,
            obj(list(kernel = str("linear"))))
)

out <- paste0("{\n  ", str("kernlab_version"), ": ", str(as.character(packageVersion("kernlab"))),
              ",\n  ", str("kcca"), ": [\n    ", paste(cases, collapse = ",\n    "), "]\n}\n")
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "tests/data/kcca_refs.json"
writeLines(out, path, sep = "")
