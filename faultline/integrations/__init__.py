"""Framework callbacks that report progress and checkpoints through ``faultline.sdk``.

``faultline.integrations.hf.FaultlineCallback`` (Hugging Face ``Trainer``) and
``faultline.integrations.lightning.FaultlineCallback`` (PyTorch Lightning). Each module
imports its framework lazily; importing it without the framework raises ImportError
saying what to install.
"""
