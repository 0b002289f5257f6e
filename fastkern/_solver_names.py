"""The solver names the estimators take, without the estimators' imports.

``fastkern --help`` lists them, and must not import scikit-learn to do so
(it took 2.5 s); the estimators validate against them and key their solver
tables by them.
"""

#: KernelPCA's eigen_solver values, "auto" first, then in the order the
#: documentation lists the solvers (``fastkern._kpca_solvers.SOLVERS``).
KERNEL_PCA = ("auto", "dense", "block_krylov", "thick_restart_lanczos", "arpack",
              "randomized", "matrix-free", "nystrom", "incomplete_cholesky")
#: Deprecated eigen_solver values and the solver each now names.
KERNEL_PCA_DEPRECATED = {"lanczos": "block_krylov"}
#: KernelCCA's solver values.
KERNEL_CCA = ("auto", "dense", "incomplete_cholesky")
