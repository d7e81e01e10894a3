"""The collector side: OTLP receiver, span normalisation, trace assembly, classification, spend."""
