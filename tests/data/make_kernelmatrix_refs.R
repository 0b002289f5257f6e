# Reference Gram matrices for tests/test_more_kernels.py from kernlab's kernelMatrix.
# Run from the repository root:  Rscript tests/data/make_kernelmatrix_refs.R
# It writes tests/data/kernelmatrix_refs.json by hand-written JSON (base R and
# kernlab only).
#
# The data are multiples of 1/4 (exact in binary), so every squared distance
# kernlab forms (by the expansion |x|^2 + |y|^2 - 2 x.y) is exact and its
# rounding to 9 decimals in laplacedot and besseldot changes nothing; rows 1
# and 4 of X are equal and X[2, ] is Y[3, ], so zero distances (where
# besseldot returns its limit) occur in both K(X, X) and K(X, Y).
suppressMessages(library(kernlab))

# sc, num, mat, str, obj: tests/data/json.R, beside this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "json.R"))

X <- outer(0:8, 0:3, function(i, j) ((5 * i + 3 * j + i * j) %% 11) / 4)
X[4, ] <- X[1, ]
Y <- outer(0:4, 0:3, function(i, j) ((7 * i + 2 * j + 1) %% 9) / 4)
Y[3, ] <- X[2, ]

# kernlab kernel, its kpar, and the fastkern kernel name and parameters.
case <- function(name, kernel, fastkern) {
  obj(list(name = str(name), kernlab = str(deparse(kernel@kpar)),
           fastkern = fastkern,
           K_XX = mat(kernelMatrix(kernel, X)),
           K_XY = mat(kernelMatrix(kernel, X, Y))))
}

cases <- c(
  case("laplacedot", laplacedot(sigma = 0.7),
       obj(list(kernel = str("laplacian_l2"), gamma = sc(0.7)))),
  case("anovadot", anovadot(sigma = 0.3, degree = 1),
       obj(list(kernel = str("anova"), gamma = sc(0.3), degree = sc(1)))),
  case("anovadot_deg3", anovadot(sigma = 0.5, degree = 3),
       obj(list(kernel = str("anova"), gamma = sc(0.5), degree = sc(3)))),
  case("besseldot", besseldot(sigma = 0.9, order = 1, degree = 1),
       obj(list(kernel = str("bessel"), gamma = sc(0.9), order = sc(1), degree = sc(1)))),
  case("besseldot_half_order", besseldot(sigma = 0.4, order = 2.5, degree = 2),
       obj(list(kernel = str("bessel"), gamma = sc(0.4), order = sc(2.5), degree = sc(2)))),
  case("besseldot_order0", besseldot(sigma = 1.3, order = 0, degree = 3),
       obj(list(kernel = str("bessel"), gamma = sc(1.3), order = sc(0), degree = sc(3)))),
  case("splinedot", splinedot(),
       obj(list(kernel = str("spline"))))
)

out <- paste0("{\n  ", str("kernlab_version"), ": ", str(as.character(packageVersion("kernlab"))),
              ",\n  ", str("X"), ": ", mat(X), ",\n  ", str("Y"), ": ", mat(Y),
              ",\n  ", str("cases"), ": [\n    ", paste(cases, collapse = ",\n    "),
              "]\n}\n")
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "tests/data/kernelmatrix_refs.json"
writeLines(out, path, sep = "")
