# Reference values for tests/test_structured.py from kernlab's stringdot kernels.
# Run from the repository root:  Rscript tests/data/make_stringdot_refs.R
# It writes tests/data/stringdot_refs.json (the strings and, for each
# stringdot type and parameters, kernelMatrix on them) by hand-written JSON,
# so that only base R and kernlab are needed.  NaN (kernlab's 0/0 when a
# normalised kernel meets a string with no substring of the length) is null.
suppressMessages(library(kernlab))

num1 <- function(v) ifelse(is.nan(v) | is.na(v), "null", sprintf("%.17g", v))
num <- function(v) paste0("[", paste(num1(as.numeric(v)), collapse = ", "), "]")
mat <- function(x) paste0("[", paste(apply(x, 1, num), collapse = ",\n      "), "]")
str <- function(s) paste0("\"", s, "\"")
strs <- function(v) paste0("[", paste(str(v), collapse = ", "), "]")
obj <- function(fields) paste0("{", paste0(str(names(fields)), ": ", fields, collapse = ",\n    "), "}")

set.seed(7)
dna <- sapply(c(12, 25, 40, 17, 9, 33), function(n)
  paste(sample(c("a", "c", "g", "t"), n, replace = TRUE), collapse = ""))
strings <- c("abcabc", "abcd", "aab", "bbbbb", "the quick brown fox", "a", "xyzzy xyz",
             "abracadabra", "cab", "ab", dna)

# kernelMatrix refuses a spectrum kernel on strings shorter than its length:
# those cases use the strings that are long enough ("rows", 0-based).
kcase <- function(type, length, lambda, normalized) {
  k <- stringdot(type = type, length = length, lambda = lambda, normalized = normalized)
  rows <- if (type == "spectrum") which(nchar(strings) >= length) else seq_along(strings)
  K <- suppressWarnings(kernelMatrix(k, as.list(strings[rows])))
  obj(list(type = str(type), length = sprintf("%d", length), lambda = sprintf("%.17g", lambda),
           normalized = if (normalized) "true" else "false",
           rows = paste0("[", paste(rows - 1, collapse = ", "), "]"), K = mat(K)))
}

cases <- c()
for (normalized in c(FALSE, TRUE)) {
  for (len in c(1, 2, 3, 5)) cases <- c(cases, kcase("spectrum", len, 1.1, normalized))
  for (len in c(2, 4)) cases <- c(cases, kcase("boundrange", len, 1.1, normalized))
  cases <- c(cases, kcase("constant", 4, 1.1, normalized))
  for (lam in c(1.1, 2, 0.8)) cases <- c(cases, kcase("exponential", 4, lam, normalized))
  for (len in c(2, 3)) cases <- c(cases, kcase("string", len, 0.8, normalized))
  cases <- c(cases, kcase("fullstring", 3, 0.8, normalized))
  for (len in c(1, 2, 3)) for (lam in c(0.5, 0.9))
    cases <- c(cases, kcase("sequence", len, lam, normalized))
}

out <- paste0("{\n  ", str("kernlab_version"), ": ", str(as.character(packageVersion("kernlab"))),
              ",\n  ", str("strings"), ": ", strs(strings),
              ",\n  ", str("cases"), ": [\n    ", paste(cases, collapse = ",\n    "),
              "]\n}\n")
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "tests/data/stringdot_refs.json"
writeLines(out, path, sep = "")
