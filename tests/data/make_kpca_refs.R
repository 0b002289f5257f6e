# Reference values for tests/test_docs_kernlab.py from kernlab's kpca: the
# "For kernlab users" page says kernlab's eig is fastkern's eigenvalues_
# divided by n and its rotated is sqrt(n) times fit_transform's result.
# Run from the repository root:  Rscript tests/data/make_kpca_refs.R
# It writes tests/data/kpca_refs.json (data, eig, rotated) by hand-written
# JSON, so that only base R and kernlab are needed.
suppressMessages(library(kernlab))

# sc, num, mat, str, obj: tests/data/json.R, beside this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "json.R"))

kpca_case <- function(name, seed, n, d, kernel, kpar, features, fastkern) {
  set.seed(seed)
  x <- matrix(rnorm(n * d), n, d)
  fit <- kpca(x, kernel = kernel, kpar = kpar, features = features)
  obj(list(name = str(name), X = mat(x), kernel = str(kernel), fastkern = fastkern,
           features = sc(features), eig = num(eig(fit)), rotated = mat(rotated(fit))))
}

cases <- c(
  kpca_case("rbf", 1, 40, 3, "rbfdot", list(sigma = 0.3), 4,
            obj(list(kernel = str("rbf"), gamma = sc(0.3)))),
  kpca_case("laplace", 2, 35, 4, "laplacedot", list(sigma = 0.7), 3,
            obj(list(kernel = str("laplacian_l2"), gamma = sc(0.7)))),
  kpca_case("poly", 3, 30, 2, "polydot", list(degree = 3, scale = 0.5, offset = 1), 3,
            obj(list(kernel = str("poly"), gamma = sc(0.5), degree = sc(3), coef0 = sc(1))))
)

out <- paste0("{\n  ", str("kernlab_version"), ": ", str(as.character(packageVersion("kernlab"))),
              ",\n  ", str("kpca"), ": [\n    ", paste(cases, collapse = ",\n    "), "]\n}\n")
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "tests/data/kpca_refs.json"
writeLines(out, path, sep = "")
