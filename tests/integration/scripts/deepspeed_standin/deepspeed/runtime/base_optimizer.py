class DeepSpeedOptimizer(object):
    pass
