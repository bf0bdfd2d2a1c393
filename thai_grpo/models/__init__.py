"""Models: building, loading, training and sampling one model, whatever the method: ``loading``, ``sft`` (the base's
pretraining, the SFT adapter), ``training`` (what every trainer shares), ``sampling`` and ``cpu`` (CPU speed-ups a
reader can skip). It may import ``jobs``, ``data`` and ``core``, never ``methods``, ``evaluation`` or ``report``."""
