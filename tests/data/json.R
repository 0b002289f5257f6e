# The hand-written JSON of the make_*_refs.R scripts (base R only), sourced by
# each: numbers to 17 significant digits, so that the tests compare the exact
# doubles R computed.
sc <- function(v) sprintf("%.17g", v)
num <- function(v) paste0("[", paste(sprintf("%.17g", as.numeric(v)), collapse = ", "), "]")
mat <- function(x) paste0("[", paste(apply(x, 1, num), collapse = ",\n      "), "]")
str <- function(s) paste0("\"", s, "\"")
obj <- function(fields) paste0("{", paste0(str(names(fields)), ": ", fields, collapse = ",\n    "), "}")
