# Reference values for tests/test_lowrank.py from kernlab's inchol and sigest.
# Run from the repository root:  Rscript tests/data/make_kernlab_refs.R
# It writes tests/data/kernlab_refs.json (data, pivots, residuals, sigest values)
# by hand-written JSON, so that only base R and kernlab are needed.
suppressMessages(library(kernlab))

# sc, num, mat, str, obj: tests/data/json.R, beside this script.
source(file.path(dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE))), "json.R"))
int <- function(v) paste0("[", paste(as.integer(v), collapse = ", "), "]")

inchol_case <- function(name, seed, n, d, kernel, kpar, tol, fastkern) {
  set.seed(seed)
  x <- matrix(rnorm(n * d), n, d)
  fit <- inchol(x, kernel = kernel, kpar = kpar, tol = tol)
  obj(list(name = str(name), X = mat(x), kernel = str(kernel),
           fastkern = fastkern, tol = sc(tol),
           pivots = int(pivots(fit) - 1),  # 0-based
           maxresiduals = num(maxresiduals(fit)),
           diagresidues = num(diagresidues(fit))))
}

sigest_case <- function(name, seed, x, frac, scaled) {
  set.seed(seed)
  s <- sigest(x, frac = frac, scaled = scaled)
  # sigest's only random draws are these two calls (kernlab 0.9.32): replaying
  # them from the same seed gives the pairs it used.
  set.seed(seed)
  m <- nrow(x)
  k <- floor(frac * m)
  i <- sample(1:m, k, replace = TRUE)
  j <- sample(1:m, k, replace = TRUE)
  xs <- if (scaled) scale(x) else x
  dist <- rowSums((xs[i, , drop = FALSE] - xs[j, , drop = FALSE])^2)
  again <- 1 / quantile(dist[dist != 0], probs = c(0.9, 0.5, 0.1))
  stopifnot(isTRUE(all.equal(unname(again), unname(s), tolerance = 1e-14)))
  obj(list(name = str(name), X = mat(x), frac = sc(frac),
           scaled = if (scaled) "true" else "false",
           i = int(i - 1), j = int(j - 1), sigest = num(s)))
}

inchol_cases <- c(
  inchol_case("rbf", 1, 60, 3, "rbfdot", list(sigma = 0.2), 1e-3,
              obj(list(kernel = str("rbf"), gamma = sc(0.2)))),
  inchol_case("rbf_tight", 2, 100, 5, "rbfdot", list(sigma = 0.02), 1e-8,
              obj(list(kernel = str("rbf"), gamma = sc(0.02)))),
  inchol_case("poly2", 3, 50, 4, "polydot", list(degree = 2, scale = 0.5, offset = 1), 1e-6,
              obj(list(kernel = str("poly"), gamma = sc(0.5), degree = sc(2), coef0 = sc(1)))),
  inchol_case("linear", 4, 40, 3, "vanilladot", list(), 1e-6,
              obj(list(kernel = str("linear"))))
)

set.seed(5)
gauss <- matrix(rnorm(120 * 4), 120, 4) %*% diag(c(1, 2, 0.5, 3))
simplex <- 3 * diag(8)
sigest_cases <- c(
  sigest_case("gauss_scaled", 11, gauss, 0.5, TRUE),
  sigest_case("gauss_unscaled", 12, gauss, 0.5, FALSE),
  sigest_case("gauss_frac1", 13, gauss, 1, FALSE),
  sigest_case("simplex_scaled", 14, simplex, 1, TRUE),
  sigest_case("simplex_unscaled", 15, simplex, 1, FALSE)
)

out <- paste0("{\n  ", str("kernlab_version"), ": ", str(as.character(packageVersion("kernlab"))),
              ",\n  ", str("inchol"), ": [\n    ", paste(inchol_cases, collapse = ",\n    "),
              "],\n  ", str("sigest"), ": [\n    ", paste(sigest_cases, collapse = ",\n    "),
              "]\n}\n")
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "tests/data/kernlab_refs.json"
writeLines(out, path, sep = "")
