"""faultline: why did the training job stop?"""
__version__ = "0.1.0"
