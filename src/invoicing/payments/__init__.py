"""Ways to pay: each method is one folder here, behind the small protocol of
``payments.method``, listed in ``payments.registry``; every payment the relayer pays for
passes the seam (``payments.seam``)."""
